"""Why a path holds no work tree of a git repository, told with GitPython's repository checks.

``tracker.targets.revisions`` finds a work tree with one ``git rev-parse`` and imports this module
only where that finds none: every command opens a repository, and importing GitPython would cost
each of them, queries included, more than the process does.
"""

from __future__ import annotations

from pathlib import Path

import git

FIX = "pass --repo PATH naming a git repository with a work tree"


def no_work_tree(path: Path) -> str:
    """The one-line reason ``path`` lies in no work tree: it is missing, in no repository, or in a
    bare one (where nothing is checked out)."""
    try:
        with git.Repo(path, search_parent_directories=True, expand_vars=False) as found:
            bare = found.bare
    except git.NoSuchPathError:
        return f"repository path {path} does not exist; {FIX}"
    except git.InvalidGitRepositoryError:
        return f"{path} is not a git repository; {FIX}"
    if bare:
        return f"{path} is a bare repository; clone it (git clone {path} DIR) and {FIX}"
    return f"{path} is not a git repository; {FIX}"
