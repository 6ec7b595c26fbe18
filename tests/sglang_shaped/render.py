"""Render the templates under ``templates/``: plain source text with a few line directives.

- ``#@if <expr>`` / ``#@elif <expr>`` / ``#@else`` / ``#@end`` (at any indentation) keep or drop the
  lines between them; ``<expr>`` is a Python expression over the boolean flags;
- ``#@include <name>`` inserts another template, rendered with the same flags;
- ``{{name}}`` is replaced by a string value.

A template file holds code exactly as it will be written, so the generated modules read as
what they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"
DIRECTIVE = re.compile(r"^\s*#@(if|elif|else|end|include)\b\s*(.*?)\s*$")
PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


@cache
def _lines(name: str) -> tuple[str, ...]:
    return tuple((TEMPLATES / name).read_text().splitlines(keepends=True))


def render(name: str, flags: Mapping[str, bool], values: Mapping[str, str]) -> str:
    """The template ``name`` (a path under ``templates/``) with ``flags`` and ``values`` applied."""
    out: list[str] = []
    # One entry per open #@if: (this branch is kept, some earlier branch was kept, the parent is kept).
    stack: list[tuple[bool, bool, bool]] = []

    def keeping() -> bool:
        return not stack or (stack[-1][0] and stack[-1][2])

    for number, line in enumerate(_lines(name), start=1):
        match = DIRECTIVE.match(line)
        where = f"{name}:{number}"
        if match is None:
            if keeping():
                out.append(_substitute(line, values, where))
            continue
        word, argument = match.groups()
        if word == "if":
            taken = _truth(argument, flags, where)
            stack.append((taken, taken, keeping()))
        elif word in ("elif", "else"):
            if not stack:
                raise ValueError(f"{where}: #@{word} without #@if")
            _, done, parent = stack.pop()
            taken = not done and (word == "else" or _truth(argument, flags, where))
            stack.append((taken, done or taken, parent))
        elif word == "end":
            if not stack:
                raise ValueError(f"{where}: #@end without #@if")
            stack.pop()
        elif keeping():
            out.append(render(argument, flags, values))
    if stack:
        raise ValueError(f"{name}: {len(stack)} #@if left open")
    return "".join(out)


def _truth(expression: str, flags: Mapping[str, bool], where: str) -> bool:
    try:
        return bool(eval(expression, {"__builtins__": {}}, dict(flags)))  # noqa: S307 (our own templates)
    except NameError as exc:
        raise ValueError(f"{where}: unknown flag in {expression!r}: {exc}") from exc


def _substitute(line: str, values: Mapping[str, str], where: str) -> str:
    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise ValueError(f"{where}: no value for {{{{{key}}}}}")
        return values[key]

    return PLACEHOLDER.sub(value, line)
