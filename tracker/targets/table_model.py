"""A TOML table converted into a typed msgspec model, with msgspec's errors reworded as one line.

Each field of a model says what to write instead in its ``Meta(description=...)``, a template with
``{key}`` (the full dotted key), ``{name}`` (its last part) and ``{value}`` (what the file holds).
msgspec reports where an error is but not which table key it was under; the key is found by
converting that table's entries one at a time.
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import msgspec

from tracker.core.errors import UsageError

Model = TypeVar("Model")
TABLE = "must be a table; write it as [{key}]"
ERROR = re.compile(r"(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?", re.DOTALL)
STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
FIELD = re.compile(r"Object (?P<kind>contains unknown|missing required) field `(?P<field>[^`]+)`")


@dataclass(frozen=True)
class Hint:
    """What to write instead (a description template), and the key and value it speaks of."""

    text: str
    keys: tuple[str, ...]
    value: object

    def said(self, prefix: str) -> str:
        key = prefix + ".".join(self.keys)
        name = self.keys[-1] if self.keys else ""
        return f"{key} {self.text.format(key=key, name=name, value=self.value)}"


@dataclass(frozen=True)
class Place:
    """Where in a table an error lies: the dotted key, the raw value there, its model type, and the
    hint of the deepest described model (or table) at or above it."""

    keys: tuple[str, ...]
    value: object
    kind: Any
    hint: Hint


def convert(file: Path, prefix: str, table: Mapping[str, Any], model: type[Model]) -> Model:
    """``table`` as a ``model``; a UsageError naming ``file``, the key and what to write instead."""
    try:
        return msgspec.convert(table, model, strict=True)
    except msgspec.ValidationError as error:
        raise UsageError(f"{file}: {_reworded(str(error), prefix, table, model)}") from None


def _reworded(message: str, prefix: str, table: Mapping[str, Any], model: Any) -> str:
    """One of msgspec's messages about ``table`` said with the TOML key and the model's hint."""
    match = ERROR.fullmatch(message)
    path = match["path"] if match and match["path"] else ""
    place = _walk(Place((), table, model, Hint(TABLE, (), table)), path)
    field = FIELD.fullmatch(match["what"]) if match else None
    if field and field["kind"] == "contains unknown":
        known = ", ".join(info.encode_name for info in msgspec.structs.fields(place.kind))
        return f"unknown key {prefix}{'.'.join((*place.keys, field['field']))}; known keys here: {known}"
    if field:
        place = _walk(place, f".{field['field']}")
    return place.hint.said(prefix)


def _walk(place: Place, path: str) -> Place:
    place = _unwrap(place, None)
    for step in STEP.finditer(path):
        field, index = step.groups()
        place = _step(_unwrap(place, "field" if field else "dict" if index == "..." else "list"), field, index)
        place = _unwrap(place, None)
    return place


def _step(place: Place, field: str | None, index: str | None) -> Place:
    """The place one step down: a field of a struct, an item of a list, or the failing entry of a dict."""
    args = get_args(place.kind)
    value = place.value
    if field is not None:
        info = next(info for info in msgspec.structs.fields(place.kind) if info.encode_name == field)
        inner = value.get(field) if isinstance(value, Mapping) else None
        return Place((*place.keys, field), inner, info.type, place.hint)
    if index != "..." and isinstance(value, list):
        return Place(place.keys, value[int(index or 0)], args[0], place.hint)
    entries = value.items() if isinstance(value, Mapping) else ()
    name, inner = next(((name, inner) for name, inner in entries if not _fits(inner, args[1])), ("", None))
    return Place((*place.keys, name), inner, args[1], place.hint)


def _unwrap(place: Place, want: str | None) -> Place:
    """Annotations peeled (their descriptions kept as the hint) and, in a union, the member that
    ``want`` (a field, a list item, a dict entry) steps into, or the only one besides None."""
    kind, text = place.kind, None
    while get_origin(kind) in (Annotated, Union, types.UnionType):
        if get_origin(kind) is Annotated:
            kind, *metas = get_args(kind)
            described = [meta.description for meta in metas if isinstance(meta, msgspec.Meta) and meta.description]
            text = described[-1] if described else text
            continue
        members = [member for member in get_args(kind) if _can(member, want)]
        if len(members) != 1:
            break
        kind = members[0]
    if text is None and isinstance(kind, type) and issubclass(kind, msgspec.Struct):
        text = TABLE
    hint = place.hint if text is None else Hint(text, place.keys, place.value)
    return Place(place.keys, place.value, kind, hint)


def _can(member: Any, want: str | None) -> bool:
    """Whether a union member is one that ``want`` steps into (any but None where ``want`` is None)."""
    bare = get_args(member)[0] if get_origin(member) is Annotated else member
    if want is None:
        return bare is not type(None)
    if get_origin(bare) in (Union, types.UnionType):
        return any(_can(inner, want) for inner in get_args(bare))
    if want == "field":
        return isinstance(bare, type) and issubclass(bare, msgspec.Struct)
    return (get_origin(bare) or bare) is (dict if want == "dict" else list)


def _fits(value: object, kind: Any) -> bool:
    try:
        msgspec.convert(value, kind, strict=True)
    except msgspec.ValidationError:
        return False
    return True
