"""Build the demo history repository and its manifest.

    python scripts/make_demo_history.py PATH [--commits N] [--manifest FILE]

Prints the head SHA and the manifest's path. Exits 2 with a one-line message on bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Runs from a checkout, where regtrack need not be installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tracker.demo.history import DEFAULT_COMMITS, build_demo_history
from tracker.demo.manifest import manifest_path, write_manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the demo history: a git repository replaying the story.")
    parser.add_argument("path", type=Path, help="the new repository; must not exist or be empty")
    parser.add_argument("--commits", type=int, default=DEFAULT_COMMITS, help="first-parent commits on main")
    parser.add_argument("--manifest", type=Path, help="where to write the manifest (default: PATH.manifest.json)")
    args = parser.parse_args(argv)
    try:
        manifest_file = manifest_path(args.path, args.manifest)
        manifest = build_demo_history(args.path, args.commits)
    except ValueError as error:
        print(f"make_demo_history: {error}", file=sys.stderr)
        return 2
    write_manifest(manifest, manifest_file)
    print(manifest.head)
    print(manifest_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
