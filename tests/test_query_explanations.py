"""Every verdict explains itself: `show` and `history` give each run its reason and where a reused
result was measured, `show --output` prints what a command left, and a filter naming nothing
stored is a usage error. Real git repositories, real workers, SQLite, the CLI."""

from __future__ import annotations

import json
import os
import pty
import re
import shlex
import struct
import subprocess
import sys
from fcntl import ioctl
from pathlib import Path
from termios import TIOCSWINSZ

import pytest
from cli_in import regtrack
from click.testing import Result
from gitrepo import GitRepo

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PROBES = """\
from probes import ProbeResult
from tracker.core.verdicts import Outcome


def needs_gpu(ctx, params):
    return ProbeResult(Outcome.SKIP, detail="needs a GPU: none visible\\nnvidia-smi: not found")
"""
CONFIG = """
[targets.lib]
repo = "."
paths = ["lib", "docs"]

[targets.lib.probes.needs_gpu]
module = "ci/probes.py:needs_gpu"

[targets.lib.probes.check]
command = ["sh", "-c", "echo checking; cat lib/core.py"]
reads = ["lib"]
"""
LONG_REASON = "row 2 wrong: " + " ".join(f"case-{n} off by {n}" for n in range(40))
FAIL_AT_LENGTH = (
    "import json, os\n"
    f"open(os.environ['REGTRACK_METRICS'], 'w').write(json.dumps({{'signature': {LONG_REASON!r}}}))\n"
    "raise SystemExit(1)\n"
)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGTRACK_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REGTRACK_DB_URL", raising=False)
    return tmp_path / "home"


@pytest.fixture
def lib(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "lib")
    repo.commit(
        "Add lib",
        {"lib/core.py": "X = 1\n", "docs/index.md": "# lib\n", "ci/probes.py": PROBES, "regtrack.toml": CONFIG},
    )
    return repo


def cli(repo: GitRepo, *args: str, code: int = 0) -> Result:
    result = regtrack(*args, cwd=repo.path)
    assert result.exit_code == code, result.output
    return result


def shown(repo: GitRepo, rev: str = "HEAD") -> list[dict]:
    return json.loads(cli(repo, "show", rev, "--json").stdout)["runs"]


def on_a_terminal(repo: GitRepo, columns: int, *args: str) -> list[str]:
    """The CLI's lines as a terminal ``columns`` wide shows them (a real pseudo-terminal)."""
    main, secondary = pty.openpty()
    ioctl(secondary, TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    env.update(TERM="xterm", PYTHONPATH=str(PROJECT_ROOT))
    process = subprocess.Popen(
        [sys.executable, "-m", "tracker.cli", *args],
        cwd=repo.path,
        env=env,
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the terminal closed: the command is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    assert process.wait() == 0
    return ANSI.sub("", b"".join(chunks).decode()).replace("\r", "").splitlines()


def test_a_reason_kept_only_in_the_detail_is_each_runs_reason(lib: GitRepo) -> None:
    """A probe that skips saying why in its detail alone: the first line of it is the reason."""
    cli(lib, "run", "--probe", "needs_gpu", "HEAD", code=3)
    [run] = shown(lib)
    assert (run["outcome"], run["signature"], run["reason"]) == ("skip", None, "needs a GPU: none visible")
    assert run["detail"] == "needs a GPU: none visible\nnvidia-smi: not found"
    for query in (("show", "HEAD"), ("history",)):
        table = cli(lib, *query).stdout
        assert "reason" in table and "needs a GPU: none visible" in table and "nvidia-smi" not in table
    [listed] = json.loads(cli(lib, "history", "--json").stdout)["runs"]
    assert listed["reason"] == "needs a GPU: none visible"


def test_a_passing_run_gives_no_reason_whatever_its_output(lib: GitRepo) -> None:
    cli(lib, "run", "--probe", "check", "HEAD")
    [run] = shown(lib)
    assert (run["outcome"], run["reason"], run["detail"]) == ("pass", None, "checking\nX = 1")
    assert "checking" not in cli(lib, "show", "HEAD").stdout


def test_a_long_reason_is_cut_to_the_terminal_and_whole_in_json(lib: GitRepo) -> None:
    lib.commit("Add a check that fails at length", {"ci/fail.py": FAIL_AT_LENGTH})
    cli(lib, "run", "--command", shlex.join([sys.executable, "ci/fail.py"]), "HEAD", code=1)
    [run] = shown(lib)
    assert run["signature"] == run["reason"] == LONG_REASON
    for columns in (140, 220):
        lines = on_a_terminal(lib, columns, "show", "HEAD")
        [row] = [line for line in lines if "row 2 wrong" in line]
        assert all(len(line) <= columns for line in lines), lines
        assert "…" in row and len(row) > columns - 5, "the reason takes what the terminal leaves it, no more"
    narrow = on_a_terminal(lib, 80, "show", "HEAD")
    assert all(len(line) <= 80 for line in narrow) and any(" row 2 wrong: case-0… " in line for line in narrow), narrow
    [listed] = json.loads(cli(lib, "history", "--json").stdout)["runs"]
    assert listed["reason"] == LONG_REASON


def test_a_reused_result_says_where_it_was_measured(lib: GitRepo) -> None:
    """By tree (a commit outside the target's paths) or copied by what it read (a commit that changes
    a path of the target that the probe did not read), copies of copies naming the first."""
    first = lib.head()
    cli(lib, "run", "--probe", "check", "HEAD")
    same_tree = lib.commit("Touch the readme", {"README.md": "lib\n"})
    docs = lib.commit("Edit the docs", {"docs/index.md": "# lib, v2\n"})
    cli(lib, "run", "--probe", "check", "HEAD")
    more_docs = lib.commit("Edit the docs again", {"docs/index.md": "# lib, v3\n"})
    cli(lib, "run", "--probe", "check", "HEAD")
    for rev, how in ((same_tree, True), (docs, False), (more_docs, False)):
        [run] = shown(lib, rev)
        assert (run["sha"], run["measured_at"], run["same_tree"]) == (rev, first, how)
    assert f"{first[:12]}, same tree" in cli(lib, "show", same_tree).stdout
    assert f"{first[:12]}, same files read" in cli(lib, "show", more_docs).stdout
    listed = json.loads(cli(lib, "history", "--json").stdout)["runs"]
    assert [(r["sha"], r.get("measured_at")) for r in listed] == [(more_docs, first), (docs, first), (first, None)]
    assert f"{first[:12]}, same files read" in cli(lib, "history").stdout
    assert [
        r["measured_at"]
        for r in json.loads(cli(lib, "history", "--range", f"{same_tree}..{more_docs}", "--json").stdout)["runs"]
    ] == [first, first, first]


def test_a_copy_at_the_commit_it_was_measured_at_is_not_marked(lib: GitRepo) -> None:
    """The target's paths changed: the commit's new tree reuses what was read under the old ones."""
    cli(lib, "run", "--probe", "check", "HEAD")
    (lib.path / "regtrack.toml").write_text(CONFIG.replace('paths = ["lib", "docs"]', 'paths = ["lib", "docs", "ci"]'))
    [again] = json.loads(cli(lib, "run", "--probe", "check", "HEAD", "--json").stdout)["rows"]
    assert again["reused"] is True
    runs = shown(lib)
    assert len(runs) == 2 and not any("measured_at" in r for r in runs)


def test_show_output_prints_what_each_run_kept(lib: GitRepo) -> None:
    cli(lib, "run", "--command", "sh -c 'echo why it broke; echo \"  at line 3\"; exit 1'", "HEAD", code=1)
    cli(lib, "run", "--command", "true", "HEAD")
    cli(lib, "run", "--probe", "needs_gpu", "HEAD", code=3)
    printed = cli(lib, "show", "HEAD", "--output").stdout
    assert "why it broke\n  at line 3\n" in printed
    assert "needs a GPU: none visible\nnvidia-smi: not found\n" in printed
    assert printed.count("no output kept") == 1
    assert printed.index("needs_gpu") < printed.index("no output kept") < printed.index("why it broke")  # newest first
    assert "at line 3" not in cli(lib, "show", "HEAD").stdout


def test_a_filter_naming_nothing_stored_is_a_usage_error(lib: GitRepo, tmp_path: Path) -> None:
    cli(lib, "run", "--probe", "check", "HEAD")
    first = lib.head()
    later = lib.commit("Change lib", {"lib/core.py": "X = 2\n"})
    latest = lib.commit("Change lib again", {"lib/core.py": "X = 3\n"})
    for args, named in (
        (("history", "--probe", "chek"), "stored probes: check"),
        (("history", "--env", "H200"), "cpu"),
        (("history", "--range", f"{first}..{later}", "--probe", "needs_gpu"), "stored probes: check"),
        (("report", "--html", str(tmp_path / "r.html"), "--env", "zzz"), "cpu"),
        (("report", "--html", str(tmp_path / "r.html"), "--probe", "needs_gpu"), "stored probes: check"),
    ):
        result = cli(lib, *args, code=2)
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("regtrack: error: "), result.stderr
        assert named in result.stderr, result.stderr
    assert not (tmp_path / "r.html").exists()
    assert (
        json.loads(
            cli(lib, "history", "--range", f"{later}..{latest}", "--probe", "check", "--env", "cpu", "--json").stdout
        )["runs"]
        == []
    )
    written = cli(lib, "report", "--html", str(tmp_path / "r.html"), "--probe", "check", "--env", "cpu").stdout
    assert written.startswith(f"wrote {tmp_path / 'r.html'}: 3 commits, 1 probes")


def test_a_command_probe_is_reported_by_its_stored_name(lib: GitRepo, tmp_path: Path) -> None:
    cli(lib, "run", "--command", "true", "HEAD")
    [run] = shown(lib)
    written = cli(lib, "report", "--html", str(tmp_path / "r.html"), "--probe", run["probe_name"]).stdout
    assert "1 probes" in written
