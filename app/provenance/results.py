"""What a reported result of a tool with provenance marks (``ContractMetadata.output_fields``)
leaves to remember: its values, each with its concrete pointer and label (docs/session.md
"Provenance").

Each mark's values (``*`` expanded) carry the mark's labels, else the contract's
``output_labels``; the scalar values no mark covers carry ``output_labels``. A scalar is
remembered as text (a string) or as an amount (a number), and also as the mark's ``kind``
when it is one; a free-text field (``extract``) also gives the values of the kinds it names;
a URL also gives its host as a domain. One entry per label: a value of a field labelled
``private_data`` and ``untrusted_content`` is remembered under both. At most
``MAX_SCALARS`` scalars of a result are read, and of a free-text field what
``app.provenance.extract`` reads: a result cut by either is not ``complete``, and the
gateway counts its call as untraced.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from app.contracts.contract import ContractMetadata, OutputMark
from app.provenance.extract import scan
from app.provenance.normalize import key
from app.provenance.store import Remembered
from app.session.pointers import values_at

MAX_SCALARS = 512


def scalars(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Every ``(pointer, scalar)`` in ``value`` (at ``path``), depth first; booleans and nulls
    name nothing and are skipped."""
    if isinstance(value, dict):
        for name, member in value.items():
            yield from scalars(member, f"{path}/{str(name).replace('~', '~0').replace('/', '~1')}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from scalars(item, f"{path}/{index}")
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield path, value


def with_host(kind: str, value_key: str) -> list[tuple[str, str]]:
    """``[(kind, value_key)]``, and for a URL its host as a domain too."""
    host = key("domain", value_key) if kind == "url" else None
    return [(kind, value_key)] + ([("domain", host)] if host is not None else [])


def value_keys(
    value: str | int | float, kind: str | None, extract: tuple[str, ...]
) -> tuple[list[tuple[str, str]], bool]:
    """The ``(kind, key)`` a scalar stands for: as text or amount, as ``kind``, and the values
    of the kinds ``extract`` names when it is free text; a URL's host as a domain too. And
    whether those are all (False when the extraction was cut)."""
    found: list[tuple[str, str]] = []
    complete = True

    def add(value_kind: str, value_key: str | None) -> None:
        if value_key is not None:
            found.extend(k for k in with_host(value_kind, value_key) if k not in found)

    if isinstance(value, str):
        add("text", key("text", value))
    else:
        add("amount", key("amount", value))
    if kind is not None:
        add(kind, key(kind, value))
    if extract and isinstance(value, str):
        extracted, complete = scan(value, extract)
        for extracted_kind, extracted_key in extracted:
            add(extracted_kind, extracted_key)
    return found, complete


def _covered(path: str, marked: set[str]) -> bool:
    return any(path == m or path.startswith(m + "/") for m in marked)


@dataclass(frozen=True)
class Recall:
    """The ``values`` of a result to remember, and whether they are all of them (``complete``)."""

    values: list[Remembered]
    complete: bool


def remembered(meta: ContractMetadata, result: Any) -> Recall:
    """The values of ``result`` to remember by ``meta``'s marks (see the module docstring)."""
    out: list[Remembered] = []
    budget = MAX_SCALARS
    complete = True

    def take(mark: OutputMark | None, path: str, value: Any) -> None:
        nonlocal budget, complete
        labels = (mark.labels if mark is not None else ()) or meta.output_labels
        for pointer, scalar in scalars(value, path):
            if budget <= 0:
                complete = False
                return
            budget -= 1
            kinds, whole = value_keys(scalar, mark.kind if mark else None, mark.extract if mark else ())
            complete = complete and whole
            out.extend(Remembered(kind, value_key, pointer, label) for kind, value_key in kinds for label in labels)

    marked: set[str] = set()
    for mark in meta.output_fields:
        for path, value in values_at(result, mark.pointer):
            marked.add(path)
            take(mark, path, value)
    if meta.output_labels:
        for path, value in scalars(result, ""):
            if not _covered(path, marked):
                take(None, path, value)
            if budget <= 0:
                break
    return Recall(out, complete)
