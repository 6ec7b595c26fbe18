"""Progress of the probing commands on stderr, one step (one measured revision) at a time.

On a terminal, each step is a line above a live bar that says N of M and what is left (as git
bisect says "roughly N steps"). Elsewhere (a CI log, a pipe), one plain line per step, written
as it is, never wrapped::

    [3/~9] 1a2b3c4d5e6f bad 2.1 s  <subject>  — <signature>

step number, total (``~`` while it is an estimate), sha12, the probe when the command runs
several, verdict, wall seconds of the step (``(stored)`` when nothing ran), the subject, and for
a step that is not good the failure's signature, cut to ``render.SIGNATURE_WIDTH``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from tracker.bisect_options import Step
from tracker.bisect_session import StepProgress
from tracker.cli.render import cut, printable, styled
from tracker.core.measurements import Measurement
from tracker.probing import RunStep, Watch
from tracker.scan import ScanStep

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


@dataclass(frozen=True)
class Tick:
    """One finished step; ``final`` when ``total`` is known, not estimated; ``left`` says in words
    what is left, for the live bar."""

    number: int
    total: int
    final: bool
    sha: str
    verdict: str
    seconds: float
    subject: str
    probe: str | None = None
    stored: bool = False
    rerun: bool = False
    signature: str | None = None
    left: str = ""

    @property
    def count(self) -> str:
        return f"{self.number}/{'' if self.final else '~'}{self.total}"

    def parts(self) -> tuple[str, str, str]:
        """The text before the verdict, the verdict, and the text after it."""
        probe = f" {self.probe}" if self.probe else ""
        how = " (stored)" if self.stored else " (rerun)" if self.rerun else ""
        why = f"  — {cut(printable(self.signature))}" if self.signature and self.verdict != "good" else ""
        return (
            f"[{self.count}] {self.sha[:12]}{probe} ",
            self.verdict,
            f" {self.seconds:.1f} s{how}  {printable(self.subject)}{why}",
        )


def plain_line(tick: Tick) -> str:
    return "".join(tick.parts())


class Reporter:
    """Where a command reports its steps: a live bar under the step lines when ``live`` (default:
    when the console is a terminal), else plain lines written straight to the console's file."""

    def __init__(self, console: Console, title: str, live: bool | None = None) -> None:
        self.console, self.title = console, title
        self.live = console.is_terminal if live is None else live
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> Reporter:
        if self.live:
            # imported here: a command without a terminal never draws it
            from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[count]}"),
                TextColumn("{task.fields[left]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.title, total=None, count="", left="")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def retitle(self, title: str) -> None:
        """Name the work anew: the live bar says what it is once the command knows."""
        self.title = title
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, description=title)

    def doing(self, what: str) -> None:
        """What runs now (the live bar shows it; a plain log waits for the step's line)."""
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, description=f"{self.title}: {printable(what)}")

    def say(self, line: str) -> None:
        """One line above the live bar, or as it is in a log; never wrapped."""
        if self._bar is None:
            self.console.file.write(line + "\n")
            self.console.file.flush()
        else:
            self._bar.console.print(Text(line), soft_wrap=True)

    def step(self, tick: Tick) -> None:
        if self._bar is None or self._task is None:
            self.say(plain_line(tick))
            return
        before, verdict, after = tick.parts()
        self._bar.console.print(Text.assemble(before, styled(verdict), after), soft_wrap=True)
        of = f"{tick.number} of {'' if tick.final else '~'}{tick.total}"
        self._bar.update(
            self._task, description=self.title, completed=tick.number, total=tick.total, count=of, left=tick.left
        )
        self._bar.refresh()


def run_tick(step: RunStep) -> Tick:
    """A step of ``run``, from its row."""
    row = step.row
    left = f"{step.total - step.number} left"
    return Tick(
        step.number,
        step.total,
        True,
        row.sha,
        row.verdict.value,
        step.seconds,
        row.subject,
        probe=row.probe,
        stored=row.reused,
        signature=row.signature,
        left=left,
    )


def counted(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def bisect_left(progress: StepProgress, workers: int) -> str:
    """What is left of a bisect, in git bisect's words."""
    trees = counted(progress.remaining, "candidate tree")
    if progress.estimate == progress.number:
        return f"done ({trees})"
    steps = progress.estimate - progress.number
    if workers == 1:
        return f"{trees}, roughly {counted(steps, 'step')} left"
    return f"{trees}, roughly {counted(-(-steps // workers), 'round')} of {workers} left"


def bisect_tick(step: Step, measurement: Measurement, progress: StepProgress, subject: str, workers: int) -> Tick:
    return Tick(
        progress.number,
        progress.estimate,
        progress.estimate == progress.number,
        step.sha,
        step.verdict.value,
        progress.seconds,
        subject,
        stored=step.reused,
        signature=measurement.signature,
        left=bisect_left(progress, workers),
    )


def scan_tick(step: ScanStep, subject: str) -> Tick:
    return Tick(
        step.number,
        step.estimate,
        step.final,
        step.sha,
        step.verdict.value,
        step.seconds,
        subject,
        probe=step.probe,
        stored=step.reused,
        rerun=step.rerun,
        signature=step.signature,
        left=f"{step.trees_measured} of {step.trees} trees measured",
    )


class Watcher(Watch):
    """A probing function's steps on ``reporter``, and its notices as one line each on stderr;
    ``workers`` is the bisect's, for what is left in rounds."""

    def __init__(self, reporter: Reporter, workers: int = 1) -> None:
        self.reporter, self.workers = reporter, workers

    def started(self, title: str) -> None:
        self.reporter.retitle(title)

    def notice(self, message: str) -> None:
        self.reporter.say(f"regtrack: {message}")

    def measuring(self, probe: str, sha: str) -> None:
        self.reporter.doing(f"{probe} at {sha[:12]}")

    def measured(self, step: RunStep) -> None:
        self.reporter.step(run_tick(step))

    def bisected(self, step: Step, measurement: Measurement, progress: StepProgress, subject: str) -> None:
        self.reporter.step(bisect_tick(step, measurement, progress, subject, self.workers))

    def scanned(self, step: ScanStep, subject: str) -> None:
        self.reporter.step(scan_tick(step, subject))
