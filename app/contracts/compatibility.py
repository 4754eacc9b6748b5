"""Contract evolution (``toolgate contracts diff|check|lock``): what changed between two sets of
published tool contracts, and whether each change is **compatible** or **breaking**.

The rule: add optional fields, never change a field's meaning silently; a breaking change is a
new version or a new tool. A contract is compared with the contract of the same namespace, name
and version, as ``GET /v1/tools`` publishes it (``ToolContract.describe()``):

- **input schema**: callers send what the old schema accepted; a change that rejects some of
  it (a new required field, a removed or renamed field, a narrowed type, enum, range, length or
  pattern, a new pattern or format, a closed object) is breaking; one that only accepts more is
  compatible. A changed ``default`` changes what a call means: breaking.
- **output schema**, the reverse direction: consumers rely on what the old schema promised; a
  change that lets the tool return something the old schema refused is breaking, one that only
  promises more is compatible.
- **metadata**: a changed ``mutating`` or ``idempotency_key_field`` is breaking (callers must
  send, or stop sending, an idempotency key); other metadata (risk, retry_safe, lease_s,
  sensitive_paths, description, members added later) is compatible and reported.
- **provenance marks** (``output_fields``, ``input_fields``): compatible and reported like
  ``output_labels``, each change said to be *stricter* (a label or an extracted kind added,
  a field marked: policies see more provenance) or *looser* (one removed) or *changed*
  (a field's kind); a member missing from an older lock is no marks.
- a removed version is breaking; a new version or a new tool is compatible.

Schemas are compared keyword by keyword as far as JSON Schema allows it without solving
regular-expression inclusion: a changed ``pattern`` or ``format``, a changed ``anyOf``/``oneOf``
that is neither a superset nor a subset of the old one, and any other keyword that changed in a
way this module does not know are **breaking both ways** (never guessed compatible). ``$ref``
is resolved against the schema's ``$defs``. Annotations (title, description, examples,
``$comment``, ``deprecated``, ``readOnly``, ``writeOnly``, ``$schema``, ``$id``) are ignored. An
object schema without ``additionalProperties`` counts as closed, as the gateway validates it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

import rfc8785

from app.contracts.contract import pointer
from app.vocabulary import qualified_tool

Published = Mapping[tuple[str, str, str], dict[str, Any]]
Kind = Literal["narrows", "widens", "changes"]

_ANNOTATIONS = frozenset({
    "title", "description", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "$schema", "$id",
})
_BOUNDS = (("minLength", "maxLength", "length"), ("minItems", "maxItems", "number of items"),
           ("minProperties", "maxProperties", "number of members"))
_KNOWN = frozenset({
    "type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "x-decimal-places", "pattern", "format", "properties", "required", "additionalProperties", "items",
    "uniqueItems", "anyOf", "oneOf", "default", "$ref", "$defs", "definitions",  # definitions: compared where used
    *(name for pair in _BOUNDS for name in pair[:2]),
})
_BREAKING_META = ("mutating", "idempotency_key_field")
_IDENTITY = ("namespace", "name", "version")
_MARKS = ("output_fields", "input_fields")


@dataclass(frozen=True)
class Change:
    """One change of one contract: ``where`` (``input``, ``output``, ``contract``), ``path``
    (a JSON Pointer into the tool's input or output, ``""`` for the whole value or the
    contract), what changed in words, and whether it is ``breaking``."""

    tool: str
    version: str
    where: str
    path: str
    what: str
    breaking: bool

    def as_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "version": self.version, "where": self.where, "path": self.path,
                "what": self.what, "breaking": self.breaking}


@dataclass(frozen=True)
class _Delta:
    path: str
    what: str
    kind: Kind


def key_of(described: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(namespace, name, version)`` of a published contract."""
    return (str(described.get("namespace") or ""), str(described["name"]), str(described["version"]))


def _canonical(value: Any) -> bytes:
    return rfc8785.dumps(value)


class _Schemas:
    """A pair of root schemas, for ``$ref`` resolution."""

    def __init__(self, old_root: Any, new_root: Any) -> None:
        self.roots = (old_root, new_root)

    def resolve(self, schema: Any, side: int, seen: frozenset[str] = frozenset()) -> Any:
        """``schema`` with a local ``$ref`` (``#/$defs/X``) replaced by its target, merged with
        the sibling keywords (draft 2020-12 applies both)."""
        if not isinstance(schema, dict) or "$ref" not in schema:
            return schema
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/") or ref in seen:
            return schema
        target: Any = self.roots[side]
        for part in ref[2:].split("/"):
            target = target.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(target, dict) else None
        if not isinstance(target, dict):
            return schema
        merged = {**self.resolve(target, side, seen | {ref}), **{k: v for k, v in schema.items() if k != "$ref"}}
        return merged


def _types(schema: dict[str, Any]) -> set[str] | None:
    value = schema.get("type")
    if value is None:
        return None
    types = {value} if isinstance(value, str) else set(value)
    if "number" in types:
        types.add("integer")
    return types


def _values(schema: dict[str, Any]) -> set[bytes] | None:
    if "const" in schema:
        return {_canonical(schema["const"])}
    if "enum" in schema and isinstance(schema["enum"], list):
        return {_canonical(v) for v in schema["enum"]}
    return None


def _set_delta(path: str, name: str, old: set[Any] | None, new: set[Any] | None) -> Iterator[_Delta]:
    """A set constraint (None: unconstrained) that changed."""
    if old == new:
        return
    if old is None:
        yield _Delta(path, f"{name} added", "narrows")
    elif new is None:
        yield _Delta(path, f"{name} removed", "widens")
    elif new > old:
        yield _Delta(path, f"{name} widened", "widens")
    elif new < old:
        yield _Delta(path, f"{name} narrowed", "narrows")
    else:
        yield _Delta(path, f"{name} changed", "changes")


def _lower(schema: dict[str, Any]) -> tuple[Fraction, bool] | None:
    """The lower bound of a number as (value, exclusive), None when unbounded."""
    bounds = []
    if isinstance(schema.get("minimum"), (int, float)):
        bounds.append((Fraction(Decimal(str(schema["minimum"]))), False))
    if isinstance(schema.get("exclusiveMinimum"), (int, float)):
        bounds.append((Fraction(Decimal(str(schema["exclusiveMinimum"]))), True))
    return max(bounds, key=lambda b: (b[0], b[1])) if bounds else None


def _upper(schema: dict[str, Any]) -> tuple[Fraction, bool] | None:
    bounds = []
    if isinstance(schema.get("maximum"), (int, float)):
        bounds.append((Fraction(Decimal(str(schema["maximum"]))), False))
    if isinstance(schema.get("exclusiveMaximum"), (int, float)):
        bounds.append((Fraction(Decimal(str(schema["exclusiveMaximum"]))), True))
    return min(bounds, key=lambda b: (b[0], not b[1])) if bounds else None


def _bound_delta(path: str, name: str, old: Any, new: Any, *, lower: bool) -> Iterator[_Delta]:
    """A bound (None: none); for ``lower`` a higher new bound narrows, for an upper one a lower."""
    if old == new:
        return
    if old is None:
        yield _Delta(path, f"{name} added", "narrows")
        return
    if new is None:
        yield _Delta(path, f"{name} removed", "widens")
        return
    tighter = new > old if lower else new < old
    yield _Delta(path, f"{name} {'raised' if lower else 'lowered'}" if tighter else
                 f"{name} {'lowered' if lower else 'raised'}", "narrows" if tighter else "widens")


def _number_bound(bound: tuple[Fraction, bool] | None, *, lower: bool) -> tuple[Fraction, int] | None:
    """A bound as a sortable key: an exclusive lower bound is tighter than an inclusive one."""
    if bound is None:
        return None
    value, exclusive = bound
    return (value, (1 if exclusive else 0) if lower else (0 if exclusive else 1))


def _step(schema: dict[str, Any]) -> Fraction | None:
    """The step every number must be a multiple of (``multipleOf``, ``x-decimal-places``)."""
    steps = []
    if isinstance(schema.get("multipleOf"), (int, float)) and schema["multipleOf"] > 0:
        steps.append(Fraction(Decimal(str(schema["multipleOf"]))))
    places = schema.get("x-decimal-places")
    if isinstance(places, int) and not isinstance(places, bool) and places >= 0:
        steps.append(Fraction(1, 10**places))
    return max(steps) if steps else None


def _step_delta(path: str, old: Fraction | None, new: Fraction | None) -> Iterator[_Delta]:
    if old == new:
        return
    if old is None:
        yield _Delta(path, "multipleOf (or decimal places) added", "narrows")
    elif new is None:
        yield _Delta(path, "multipleOf (or decimal places) removed", "widens")
    elif (new / old).denominator == 1:
        yield _Delta(path, "multipleOf coarser (fewer decimal places)", "narrows")
    elif (old / new).denominator == 1:
        yield _Delta(path, "multipleOf finer (more decimal places)", "widens")
    else:
        yield _Delta(path, "multipleOf changed", "changes")


def _closed(schema: dict[str, Any]) -> Any:
    """``additionalProperties``, an absent one counting as closed (as the gateway validates)."""
    return schema.get("additionalProperties", False)


def _compare_objects(pair: _Schemas, old: dict[str, Any], new: dict[str, Any], path: str) -> Iterator[_Delta]:
    old_props = old.get("properties") or {}
    new_props = new.get("properties") or {}
    old_required = set(old.get("required") or ())
    new_required = set(new.get("required") or ())
    removed = [name for name in old_props if name not in new_props]
    added = [name for name in new_props if name not in old_props]
    for name in removed:
        twin = next((a for a in added if _canonical(new_props[a]) == _canonical(old_props[name])), None)
        if twin is not None:
            yield _Delta(pointer([*_parts(path), name]), f"field {name} renamed to {twin}", "changes")
            added.remove(twin)
        else:
            yield _Delta(pointer([*_parts(path), name]), f"field {name} removed", "changes")
    for name in added:
        where = pointer([*_parts(path), name])
        if name in new_required:
            yield _Delta(where, f"new required field {name}", "narrows")
        elif _closed(old) is False:
            yield _Delta(where, f"new optional field {name}", "widens")
    for name in old_props:
        if name in new_props:
            where = pointer([*_parts(path), name])
            yield from _compare(pair, old_props[name], new_props[name], where)
            if name in new_required and name not in old_required:
                yield _Delta(where, f"field {name} now required", "narrows")
            elif name in old_required and name not in new_required:
                yield _Delta(where, f"field {name} now optional", "widens")
    old_extra, new_extra = _closed(old), _closed(new)
    if old_extra is False and new_extra is not False:
        yield _Delta(path, "object opened to other members", "widens")
    elif old_extra is not False and new_extra is False:
        yield _Delta(path, "object closed to other members", "narrows")
    elif isinstance(old_extra, dict) and isinstance(new_extra, dict):
        yield from _compare(pair, old_extra, new_extra, path + "/*")


def _parts(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]] if path else []


def _alternatives(schema: dict[str, Any]) -> set[bytes]:
    """The ``anyOf``/``oneOf`` alternatives of a schema, else the schema itself."""
    for keyword in ("anyOf", "oneOf"):
        if isinstance(schema.get(keyword), list):
            return {_canonical(alt) for alt in schema[keyword]}
    return {_canonical({k: v for k, v in schema.items() if k not in _ANNOTATIONS and k != "default"})}


def _compare(pair: _Schemas, old_schema: Any, new_schema: Any, path: str) -> Iterator[_Delta]:
    """Every difference of ``new_schema`` from ``old_schema`` at instance path ``path``."""
    old = pair.resolve(old_schema, 0)
    new = pair.resolve(new_schema, 1)
    if isinstance(old, bool) or isinstance(new, bool) or not isinstance(old, dict) or not isinstance(new, dict):
        if old != new:
            accepts_all = (old is True or old == {}, new is True or new == {})
            kind: Kind = "widens" if accepts_all[1] else "narrows" if accepts_all[0] else "changes"
            yield _Delta(path, "schema replaced", kind)
        return
    meaningful_old = {k: v for k, v in old.items() if k not in _ANNOTATIONS}
    meaningful_new = {k: v for k, v in new.items() if k not in _ANNOTATIONS}
    if _canonical(meaningful_old) == _canonical(meaningful_new):
        return
    if any(k in meaningful_old or k in meaningful_new for k in ("anyOf", "oneOf")):
        before, after = _alternatives(meaningful_old), _alternatives(meaningful_new)
        if after > before:
            yield _Delta(path, "alternatives added", "widens")
        elif after < before:
            yield _Delta(path, "alternatives removed", "narrows")
        elif after != before:
            yield _Delta(path, "alternatives changed", "changes")
        return
    yield from _set_delta(path, "type", _types(old), _types(new))
    yield from _set_delta(path, "allowed values (enum/const)", _values(old), _values(new))
    yield from _bound_delta(path, "minimum", _number_bound(_lower(old), lower=True),
                            _number_bound(_lower(new), lower=True), lower=True)
    yield from _bound_delta(path, "maximum", _number_bound(_upper(old), lower=False),
                            _number_bound(_upper(new), lower=False), lower=False)
    yield from _step_delta(path, _step(old), _step(new))
    for low, high, what in _BOUNDS:
        yield from _bound_delta(path, f"minimum {what}", old.get(low), new.get(low), lower=True)
        yield from _bound_delta(path, f"maximum {what}", old.get(high), new.get(high), lower=False)
    for keyword in ("pattern", "format"):
        if old.get(keyword) != new.get(keyword):
            if keyword not in old:
                yield _Delta(path, f"{keyword} added", "narrows")
            elif keyword not in new:
                yield _Delta(path, f"{keyword} removed", "widens")
            else:
                yield _Delta(path, f"{keyword} changed", "changes")
    if bool(old.get("uniqueItems")) != bool(new.get("uniqueItems")):
        yield _Delta(path, "uniqueItems " + ("added" if new.get("uniqueItems") else "removed"),
                     "narrows" if new.get("uniqueItems") else "widens")
    defaults = [(_canonical(schema["default"]),) if "default" in schema else () for schema in (old, new)]
    if defaults[0] != defaults[1]:
        yield _Delta(path, "default changed", "changes")
    if "properties" in old or "properties" in new or "object" in (_types(old) or set()) | (_types(new) or set()):
        yield from _compare_objects(pair, old, new, path)
    if "items" in old or "items" in new:
        yield from _compare(pair, old.get("items", True), new.get("items", True), path + "/*")
    for keyword in sorted((set(meaningful_old) | set(meaningful_new)) - _KNOWN):
        if _canonical(old.get(keyword)) != _canonical(new.get(keyword)):
            yield _Delta(path, f"{keyword} changed", "changes")


def schema_changes(old: Any, new: Any, *, direction: Literal["input", "output"]) -> list[tuple[str, str, bool]]:
    """``(path, what, breaking)`` of every change from ``old`` to ``new`` (None: no schema,
    anything goes) for a schema read in ``direction``."""
    pair = _Schemas(old, new)
    old_schema = True if old is None else old
    new_schema = True if new is None else new
    out = []
    for delta in _compare(pair, old_schema, new_schema, ""):
        if direction == "input":
            breaking = delta.kind != "widens"
        else:  # a default means nothing for what a tool returns
            breaking = delta.kind != "narrows" and not delta.what.startswith("default")
        out.append((delta.path, delta.what, breaking))
    return out


def mark_changes(member: str, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """``(pointer, what)`` for every change of the provenance marks ``member`` (see the module
    docstring): labels and extracted kinds added are stricter, removed looser."""
    before = {m["pointer"]: m for m in old}
    after = {m["pointer"]: m for m in new}
    for at in sorted(set(before) | set(after)):
        was, now = before.get(at), after.get(at)
        if was is None:
            yield at, f"{member}: {at or '(the whole result)'} marked (stricter)"
            continue
        if now is None:
            yield at, f"{member}: mark of {at or '(the whole result)'} removed (looser)"
            continue
        for what in ("labels", "extract"):
            added = sorted(set(now.get(what) or ()) - set(was.get(what) or ()))
            removed = sorted(set(was.get(what) or ()) - set(now.get(what) or ()))
            if added:
                yield at, f"{member}: {what} {', '.join(added)} added (stricter)"
            if removed:
                yield at, f"{member}: {what} {', '.join(removed)} removed (looser)"
        if was.get("kind") != now.get("kind"):
            yield at, f"{member}: kind changed from {was.get('kind')!r} to {now.get('kind')!r}"


def contract_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """Every change between two published forms of one contract (same key)."""
    namespace, name, version = key_of(old)
    tool = qualified_tool(namespace, name)
    changes = []
    for member in _MARKS:
        changes += [Change(tool, version, "contract", path, what, False)
                    for path, what in mark_changes(member, old.get(member) or [], new.get(member) or [])]
    for member in sorted((set(old) | set(new)) - {"input_schema", "output_schema", *_IDENTITY, *_MARKS}):
        if _canonical(old.get(member)) != _canonical(new.get(member)):
            what = f"{member} changed from {old.get(member)!r} to {new.get(member)!r}"
            changes.append(Change(tool, version, "contract", "", what, member in _BREAKING_META))
    for where, direction in (("input", "input"), ("output", "output")):
        found = schema_changes(old.get(f"{where}_schema"), new.get(f"{where}_schema"), direction=direction)  # type: ignore[arg-type]
        changes += [Change(tool, version, where, path, what, breaking) for path, what, breaking in found]
    return changes


def compare(old: Published, new: Published) -> list[Change]:
    """Every change from the contracts ``old`` to ``new``, by tool and version."""
    changes: list[Change] = []
    for key in sorted(set(old) | set(new)):
        tool, version = qualified_tool(key[0], key[1]), key[2]
        if key not in new:
            changes.append(Change(tool, version, "contract", "", "version removed: calls to it are refused", True))
        elif key not in old:
            others = any(k[:2] == key[:2] for k in old)
            changes.append(Change(tool, version, "contract", "", "new version" if others else "new tool", False))
        else:
            changes += contract_changes(old[key], new[key])
    return changes
