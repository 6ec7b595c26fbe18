"""Benchmark `regtrack bisect` against `git bisect run`: same probe, same range, one run.

    python scripts/bench_bisect.py [--commits 1024] [--keep DIR] [--device cpu --dtype float32]

Builds the demo history and bisects a range holding exactly one transition of the probe
``target_verify_metadata``: good is the commit that mends the untestable stretch (the backend
imports, the metadata bug is not there yet), bad is the first-parent parent of the bug's fix; the
first bad commit is the one that introduced the bug. The range holds a merge, so git bisects with
``--first-parent``.

* git: ``git bisect start --first-parent BAD GOOD`` in a separate clone (git bisect checks out in
  the work tree), then ``git bisect run python -c PROBE``, PROBE running the same probe on the
  checked-out tree in its own Python process per step (exit 0 good, 1 bad, 125 skip). Every
  execution is counted through a counter file. git does not test the ends.
* regtrack: ``python -m tracker.cli bisect --good G --bad B --probe P --repo DEMO --json`` in a
  subprocess with ``REGTRACK_HOME`` a fresh directory; its executions count both ends. The same
  command is then run again; its executions should be 0.
* ``regtrack bisect --command``: git's probe step, the same command line, given to regtrack as
  ``--command`` over the whole repository (paths ``.``: every commit of the range changes the
  tree, so tree reuse skips nothing and both tools search the same n commits). Compared per
  execution (regtrack's fixed cost spread over its executions, target <= 1.1x git's) and whole
  (target <= 1.3, regtrack's two end checks included); ``--strategy binary`` trusts every result
  as git does, ``auto`` (the default) adds one confirmation rerun. A second identical bisect
  runs nothing (target < 0.5 s, the median of ``SECOND_RUNS`` runs). ``--command-only`` runs just these rows.

* A cheap check (``--cheap-only`` runs just these rows): a repository of ``CHEAP_COMMITS`` commits
  built by the script, and an untracked ``check.py`` of about 0.1 s in its work tree, given to
  both tools as a user writes it (``git bisect run python3 check.py``, ``regtrack bisect --command
  "python3 check.py"``, from the work tree). regtrack runs with its ends checked (the default,
  target: git's executions + 2) and with ``--assume-ends`` (target: git's executions); targets for
  both: wall <= 1.3x git's, and regtrack's own cost per execution <= 50 ms: its wall less the
  check's own time (the check timed alone, in a checkout, times the executions) and less its
  fixed cost, over its executions. The fixed cost is the wall of ``regtrack run --command true HEAD
  --fresh``: interpreter, imports, database, a worker started, and one execution of a command that
  does nothing (so the figure leaves out a ninth or so of one execution's own cost). Each regtrack
  home is set up as on a machine that has used regtrack before: its database created, a worker
  started once.

Wall times cover each whole command, interpreter start-up included (for git: bisect start and
bisect run; the clone is set-up, and so is creating regtrack's database in its fresh home).
Exits 1 when either tool names a wrong culprit, else 0.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Runs from a checkout, where regtrack need not be installed.
sys.path.insert(0, str(ROOT))

from tracker.demo.fast_import import FastImportStream, Signature, fast_import  # noqa: E402 - after the sys.path insert
from tracker.demo.history import DemoManifest, build_demo_history  # noqa: E402 - after the sys.path insert

PROBE = "target_verify_metadata"
BUG = "target_verify_overwrite"
COUNTER_ENV = "REGTRACK_BENCH_COUNTER"
SECOND_RUNS = 5
"""The second identical bisect takes a fraction of a second, so one run says more about the
machine's noise than about the command: its wall time is the median of this many."""

# The probe step for `git bisect run`: one fresh Python process per step, the same probe and the
# same verdict rule as regtrack (any fail/crash/timeout is bad; an error, or no passing case, skips).
GIT_PROBE = """
import os, sys
from pathlib import Path
with open(os.environ[{counter!r}], "a") as counter:
    counter.write(os.getcwd() + "\\n")
from probes import ProbeContext, get_probe, run_probe, summarize
from tracker.core.verdicts import Outcome
result = summarize(run_probe(get_probe({probe!r}), ProbeContext(root=Path.cwd(), device={device!r}, dtype={dtype!r})))
bad = {{Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT}}
sys.exit(1 if result.outcome in bad else 0 if result.outcome is Outcome.PASS else 125)
"""


@dataclass
class ToolResult:
    tool: str
    executions: int | None
    wall_s: float
    culprit: str | None
    returncode: int
    note: str = ""
    reused: int | None = None


UNSET = ("REGTRACK_DB_URL", "PYTHONDONTWRITEBYTECODE")
"""Another store, and a setting that makes every Python process compile all it imports afresh,
as no user's machine does."""


def clean_env(**extra: str) -> dict[str, str]:
    """Our environment without GIT_* overrides or the variables of ``UNSET``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k not in UNSET}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env or clean_env(), check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {result.stderr.strip()}")
    return result.stdout


def pick_range(manifest: DemoManifest, repo: Path) -> tuple[str, str, str, int, int]:
    """(good, bad, first bad, n commits in (good, bad] on the first-parent line, merges among them)."""
    span = manifest.bugs[BUG]
    good = manifest.untestable.mended
    bad = git(repo, "rev-parse", f"{span.fixed}^1").strip()
    line = git(repo, "rev-list", "--first-parent", f"{good}..{bad}").split()
    merges = git(repo, "rev-list", "--first-parent", "--merges", f"{good}..{bad}").split()
    if span.introduced not in line:
        raise RuntimeError(f"the introducing commit {span.introduced} is not in ({good}, {bad}]")
    return good, bad, span.introduced, len(line), len(merges)


def run_git(demo: Path, work: Path, good: str, bad: str, device: str, dtype: str) -> ToolResult:
    clone = work / "git-bisect-clone"
    git(work, "clone", "--quiet", str(demo), str(clone))
    counter = work / "git-probe-count.txt"
    counter.write_text("")
    env = clean_env(**{COUNTER_ENV: str(counter)})
    started = time.perf_counter()
    start = subprocess.run(
        ["git", "bisect", "start", "--first-parent", bad, good],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if start.returncode != 0:
        raise RuntimeError(f"git bisect start failed: {start.stderr.strip()}")
    run = subprocess.run(
        ["git", "bisect", "run", *git_probe_argv(device, dtype)],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    (work / "git-bisect-run.log").write_text(run.stdout + run.stderr)
    found = re.search(r"^([0-9a-f]{40}) is the first bad commit", run.stdout, re.MULTILINE)
    executions = len(counter.read_text().splitlines())
    subprocess.run(["git", "bisect", "reset", "--quiet"], cwd=clone, env=env, capture_output=True, check=False)
    note = "" if run.returncode == 0 else f"git bisect run exited {run.returncode}; see {work / 'git-bisect-run.log'}"
    return ToolResult(
        "git bisect run (ends not tested)", executions, wall, found.group(1) if found else None, run.returncode, note
    )


def git_probe_argv(device: str, dtype: str) -> list[str]:
    return [sys.executable, "-c", GIT_PROBE.format(counter=COUNTER_ENV, probe=PROBE, device=device, dtype=dtype)]


def run_regtrack(
    label: str,
    demo: Path,
    home: Path,
    good: str,
    bad: str,
    device: str,
    dtype: str,
    log: Path,
    selector: tuple[str, ...] = ("--probe", PROBE),
    counter: Path | None = None,
) -> ToolResult:
    command = [
        sys.executable,
        "-m",
        "tracker.cli",
        "bisect",
        "--good",
        good,
        "--bad",
        bad,
        *selector,
        "--repo",
        str(demo),
        "--device",
        device,
        "--dtype",
        dtype,
        "--json",
    ]
    env = clean_env(REGTRACK_HOME=str(home), **({COUNTER_ENV: str(counter)} if counter else {}))
    if not home.exists():
        # set-up, like git's clone: the database a machine that has used regtrack before already has
        subprocess.run([sys.executable, "-m", "tracker.cli", "db", "upgrade"], env=env, capture_output=True, check=True)
    started = time.perf_counter()
    result = subprocess.run(command, cwd=demo.parent, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    log.write_text(result.stdout + result.stderr)
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return ToolResult(label, None, wall, None, result.returncode, f"exit {result.returncode}: {tail}")
    return ToolResult(
        label, report.get("executions"), wall, report.get("culprit"), result.returncode, reused=report.get("reused")
    )


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def bench(work: Path, commits: int, device: str, dtype: str, command_only: bool = False) -> int:
    demo = work / "demo"
    started = time.perf_counter()
    manifest = build_demo_history(demo, commits)
    build_s = time.perf_counter() - started
    good, bad, first_bad, n, merges = pick_range(manifest, demo)
    print(f"demo history: {commits} commits, built in {build_s:.1f} s at {demo}")
    print(
        f"probe {PROBE}, range good {good[:12]} .. bad {bad[:12]}: "
        f"n = {n} first-parent commits in (good, bad], {merges} merge(s)"
    )
    print(f"expected first bad commit: {first_bad[:12]} (the introduction of {BUG})")
    print(flush=True)
    # untimed: the first import of torch after a boot reads it from disk; neither tool should pay for that
    subprocess.run(
        git_probe_argv(device, dtype),
        cwd=demo,
        env=clean_env(**{COUNTER_ENV: os.devnull}),
        capture_output=True,
        check=False,
    )
    git_result = run_git(demo, work, good, bad, device, dtype)
    ok = True if command_only else bench_probe(work, demo, good, bad, first_bad, n, device, dtype, git_result)
    ok = bench_command(work, demo, good, bad, first_bad, n, device, dtype, git_result) and ok
    print()
    return 0 if bench_cheap(work) and ok else 1


def bench_probe(
    work: Path, demo: Path, good: str, bad: str, first_bad: str, n: int, device: str, dtype: str, git_result: ToolResult
) -> bool:
    home = work / "regtrack-home"
    results = [
        git_result,
        run_regtrack(
            "regtrack bisect (both ends counted)", demo, home, good, bad, device, dtype, work / "regtrack-1.log"
        ),
        run_regtrack(
            "regtrack bisect, 2nd identical run", demo, home, good, bad, device, dtype, work / "regtrack-2.log"
        ),
    ]
    git_result, first, second = results

    def executions(r: ToolResult) -> str:
        if r.executions is None:
            return "?"
        return f"{r.executions} (+{r.reused} reused)" if r.reused else str(r.executions)

    rows = [[r.tool, executions(r), f"{r.wall_s:.1f}", "yes" if r.culprit == first_bad else "no"] for r in results]
    print(table(rows, ["tool", "executions", "wall s", "culprit ok"]))
    for r in results:
        if r.culprit != first_bad:
            print(
                f"  {r.tool}: named {r.culprit or 'nothing'}, expected {first_bad}" + (f"; {r.note}" if r.note else "")
            )
    print()
    limit = math.ceil(math.log2(n)) + 2
    ok = first.executions is not None and first.executions <= limit
    print(f"regtrack executions <= ceil(log2 n) + 2: {'yes' if ok else 'no'} ({first.executions} <= {limit})")
    print(
        f"git bisect run executions = {git_result.executions} (ends not tested; {git_result.executions + 2} with them)"
    )
    print(f"wall ratio regtrack/git = {first.wall_s / git_result.wall_s:.2f} (target <= 0.5)")
    print(f"second identical bisect executions = {second.executions} (target 0)")
    print(flush=True)
    return all(r.culprit == first_bad for r in results)


def bench_command(
    work: Path, demo: Path, good: str, bad: str, first_bad: str, n: int, device: str, dtype: str, git_result: ToolResult
) -> bool:
    """The same command line under `git bisect run` and under `regtrack bisect --command`."""
    counter = work / "command-probe-count.txt"
    command = shlex.join(git_probe_argv(device, dtype))
    rows = [git_result]
    for strategy in ("binary", "auto"):
        selector, home = ("--command", command, "--strategy", strategy), work / f"regtrack-command-{strategy}-home"
        log = work / f"regtrack-command-{strategy}.log"
        rows.append(
            run_regtrack(
                f"regtrack bisect --command, {strategy}", demo, home, good, bad, device, dtype, log, selector, counter
            )
        )
    again, home = ("--command", command, "--strategy", "binary"), work / "regtrack-command-binary-home"
    repeats = [
        run_regtrack(
            "  2nd identical bisect",
            demo,
            home,
            good,
            bad,
            device,
            dtype,
            work / "regtrack-command-2.log",
            again,
            counter,
        )
        for _ in range(SECOND_RUNS)
    ]
    second = sorted(repeats, key=lambda r: r.wall_s)[SECOND_RUNS // 2]
    print(
        'regtrack bisect --command against git bisect run: the same command, paths "." '
        f"(n = {n}, every commit changes the tree)"
    )
    print(
        table(
            [_command_row(r, first_bad) for r in [*rows, second]],
            ["tool", "executions", "wall s", "s / execution", "culprit ok"],
        )
    )
    for r in [*rows, second]:
        if r.culprit != first_bad:
            print(
                f"  {r.tool}: named {r.culprit or 'nothing'}, expected {first_bad}" + (f"; {r.note}" if r.note else "")
            )
    binary = rows[1]
    if git_result.executions and binary.executions:
        per_git, per_regtrack = git_result.wall_s / git_result.executions, binary.wall_s / binary.executions
        print(f"wall per execution regtrack/git = {per_regtrack / per_git:.2f} (binary; target <= 1.1)")
        print(
            f"whole-command wall ratio regtrack/git = {binary.wall_s / git_result.wall_s:.2f} "
            "(binary, both ends included; target <= 1.3)"
        )
        print(f"  with auto's confirmation rerun: {rows[2].wall_s / git_result.wall_s:.2f}")
    walls = ", ".join(f"{r.wall_s:.2f}" for r in repeats)
    print(
        f"second identical bisect: {second.wall_s:.2f} s, the median of {SECOND_RUNS} runs ({walls}), "
        f"{second.executions} executions (target < 0.5 s, 0)"
    )
    return all(r.culprit == first_bad for r in [*rows, *repeats])


def _command_row(r: ToolResult, first_bad: str) -> list[str]:
    per = f"{r.wall_s / r.executions:.2f}" if r.executions else "-"
    return [
        r.tool,
        "?" if r.executions is None else str(r.executions),
        f"{r.wall_s:.2f}",
        per,
        "yes" if r.culprit == first_bad else "no",
    ]


CHEAP_COMMITS = 500
CHEAP_CULPRIT = 337
CHEAP_CHECK = f"""\
import os, sys, time
counter = os.environ.get({COUNTER_ENV!r})
if counter:
    with open(counter, "a") as file:
        file.write("run\\n")
time.sleep(0.08)
sys.exit(1 if int(open("value.txt").read()) >= {CHEAP_CULPRIT} else 0)
"""


def build_cheap_repository(path: Path) -> list[str]:
    """``CHEAP_COMMITS`` commits, commit i writing i to value.txt (fifty other files beside it),
    and the untracked check; returns the first-parent line, oldest first."""
    stream, marks = FastImportStream(), path.parent / "cheap-marks"
    path.mkdir(parents=True)
    git(path, "init", "--quiet", "-b", "main")
    parent: list[int] = []
    for i in range(CHEAP_COMMITS):
        files = {"value.txt": f"{i}\n".encode()}
        if i == 0:
            files.update({f"src/mod{k}.py": f"X = {k}\n".encode() for k in range(50)})
        parent = [
            stream.commit(
                "refs/heads/main",
                Signature("A U Thor", "a@example.com", 1_700_000_000 + 60 * i),
                f"value {i}",
                parent,
                files,
            )
        ]
    fast_import(path, stream.take(), marks)
    git(path, "reset", "--hard", "--quiet")
    (path / "check.py").write_text(CHEAP_CHECK)
    (path / ".git" / "info" / "exclude").write_text("check.py\n")
    return git(path, "rev-list", "--reverse", "main").split()


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return done, time.perf_counter() - started


def bench_cheap(work: Path) -> bool:
    repo = work / "cheap"
    line = build_cheap_repository(repo)
    good, bad, culprit = line[0], line[-1], line[CHEAP_CULPRIT]
    counter = work / "cheap-count.txt"
    env = clean_env(**{COUNTER_ENV: str(counter)})
    check_s = sorted(timed(["python3", "check.py"], repo, clean_env())[1] for _ in range(5))[2]
    counter.write_text("")
    started = time.perf_counter()
    subprocess.run(["git", "bisect", "start", bad, good], cwd=repo, env=env, capture_output=True, check=True)
    run = subprocess.run(
        ["git", "bisect", "run", "python3", "check.py"], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    git_wall = time.perf_counter() - started
    subprocess.run(["git", "bisect", "reset"], cwd=repo, env=env, capture_output=True, check=False)
    found = re.search(r"^([0-9a-f]{40}) is the first bad commit", run.stdout, re.MULTILINE)
    git_executions = len(counter.read_text().splitlines())
    rows = [
        [
            "git bisect run (ends not run)",
            str(git_executions),
            f"{git_wall:.2f}",
            "1.00",
            "-",
            "yes" if found and found.group(1) == culprit else "no",
        ]
    ]
    ok = bool(found and found.group(1) == culprit)
    for label, flags, allowed in (
        ("regtrack bisect --command", (), git_executions + 2),
        ("  --assume-ends", ("--assume-ends",), git_executions),
    ):
        home = work / f"cheap-home{len(rows)}"
        home_env = clean_env(REGTRACK_HOME=str(home))
        regtrack = [sys.executable, "-m", "tracker.cli"]
        subprocess.run([*regtrack, "db", "upgrade"], env=home_env, capture_output=True, check=True)
        subprocess.run(
            [*regtrack, "run", "--command", "true", "HEAD"], cwd=repo, env=home_env, capture_output=True, check=False
        )
        fixed = sorted(
            timed([*regtrack, "run", "--command", "true", "HEAD", "--fresh"], repo, home_env)[1] for _ in range(3)
        )[1]
        argv = [*regtrack, "bisect", "--good", good, "--bad", bad, "--command", "python3 check.py", *flags, "--json"]
        first, wall = timed(argv, repo, home_env)
        report = json.loads(first.stdout) if first.stdout.strip() else {}
        executions = report.get("executions") or 0
        own = (wall - fixed - executions * check_s) / executions if executions else float("nan")
        right = report.get("culprit") == culprit
        ok = ok and right
        rows.append(
            [
                label,
                f"{executions} (target <= {allowed})",
                f"{wall:.2f}",
                f"{wall / git_wall:.2f}",
                f"{own * 1000:.0f} ms",
                "yes" if right else "no",
            ]
        )
    print(
        f"a cheap check: {CHEAP_COMMITS} commits built by the script, python3 check.py untracked, "
        f"{check_s:.3f} s alone; regtrack's fixed cost {fixed:.2f} s"
    )
    print(table(rows, ["tool", "executions", "wall s", "x git", "own cost / execution", "culprit ok"]))
    print("targets: wall <= 1.3x git's; own cost per execution <= 50 ms")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compare regtrack bisect with git bisect run on the demo history.")
    parser.add_argument("--commits", type=int, default=1024, help="first-parent commits of the demo history")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="work in DIR (missing or empty) and keep it")
    parser.add_argument("--device", default="cpu", help="probe device for both tools (cpu or cuda)")
    parser.add_argument("--dtype", help="probe dtype (default: float32 on cpu, bfloat16 on cuda)")
    parser.add_argument(
        "--command-only", action="store_true", help="only the rows of regtrack bisect --command against git bisect run"
    )
    parser.add_argument(
        "--cheap-only",
        action="store_true",
        help="only the rows of a 0.1 s command check on a repository built by the script",
    )
    args = parser.parse_args(argv)
    dtype = args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32")
    if args.cheap_only:
        work = Path(tempfile.mkdtemp(prefix="regtrack-bench-cheap-"))
        try:
            return 0 if bench_cheap(work) else 1
        finally:
            shutil.rmtree(work, ignore_errors=True)
    if args.keep is not None:
        if args.keep.exists() and (not args.keep.is_dir() or any(args.keep.iterdir())):
            print(f"bench_bisect: {args.keep} exists and is not an empty directory", file=sys.stderr)
            return 2
        args.keep.mkdir(parents=True, exist_ok=True)
        return bench(args.keep.resolve(), args.commits, args.device, dtype, args.command_only)
    work = Path(tempfile.mkdtemp(prefix="regtrack-bench-bisect-"))
    try:
        return bench(work, args.commits, args.device, dtype, args.command_only)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
