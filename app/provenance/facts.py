"""``input.provenance`` of a decide call (docs/session.md "Provenance"; the shape in
docs/design.md §3): for each scalar argument, and each value extracted from a free-text
argument, the reported results of the same tenant, subject and conversation it matches
(``sources``), whether the user's prompt names it (``in_prompt``) and whether a result field
that is not ``untrusted_content`` holds it (``in_trusted_output``); and the labels of the
conversation's calls whose values cannot be traced (``untraced_labels``).

Only the members the policy reads are built; the remembered sources of every value of the
call are read in one round trip. ``context.user_prompt`` is what the authenticated caller
vouches for as the user's words (docs/design.md "Trust boundaries"); nothing a model or a tool
wrote is trusted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from app.contracts.contract import ContractMetadata, InputMark
from app.provenance.extract import values_in
from app.provenance.normalize import key
from app.provenance.results import MAX_SCALARS, scalars, value_keys, with_host
from app.provenance.store import ProvenanceStore, Source
from app.session.keys import SubjectKeys
from app.session.pointers import values_at
from app.session.reads import Reads

ALL_KINDS = ("url", "domain", "email", "iban", "phone", "path", "amount")
#: A number argument is looked up, and named by the prompt, as an amount.
_KEY_KIND = {"number": "amount"}
_UNTRUSTED = "untrusted_content"


@dataclass
class _Value:
    """One argument or extracted value: its kind, the keys it is looked up under and its own key."""

    kind: str
    lookups: list[tuple[str, str]]
    own: tuple[str, str] | None
    sources: list[Source] = field(default_factory=list)


class Prompt:
    """The user's prompt as values: its text key and the ``(kind, key)`` of every value in it."""

    def __init__(self, text: str | None) -> None:
        self.text = key("text", text) if isinstance(text, str) else None
        self.values: set[tuple[str, str]] = set()
        if self.text is not None and isinstance(text, str):
            for kind, value_key in values_in(text, ALL_KINDS):
                self.values.update(with_host(kind, value_key))

    def names(self, value: _Value, raw: Any) -> bool:
        """Whether the prompt holds ``value``: its own key among the prompt's values, or (a
        string) its words in the prompt's, at word boundaries."""
        if self.text is None:
            return False
        if value.own in self.values:
            return True
        words = key("text", raw) if isinstance(raw, str) else None
        return words is not None and _contains_words(self.text, words)


@lru_cache(maxsize=256)
def _prompt_of(text: str) -> Prompt:
    return Prompt(text)


def _prompt(text: Any) -> Prompt:
    """The prompt's values, kept for the worker's last 256 prompts: the calls of one user turn
    share their prompt, and finding its values costs more than the rest of the provenance."""
    return _prompt_of(text) if isinstance(text, str) else Prompt(None)


def _contains_words(text: str, words: str) -> bool:
    start = text.find(words)
    while start >= 0:
        end = start + len(words)
        before = text[start - 1] if start > 0 else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or after.isalnum()):
            return True
        start = text.find(words, start + 1)
    return False


def _marks(meta: ContractMetadata | None, call_input: Any) -> dict[str, InputMark]:
    """The input mark of each concrete pointer of ``call_input`` that one names."""
    if meta is None or not meta.input_fields:
        return {}
    marks = {m.pointer: m for m in meta.input_fields if "*" not in m.pointer}
    for mark in meta.input_fields:
        if "*" in mark.pointer:
            marks.update((path, mark) for path, _ in values_at(call_input, mark.pointer))
    return marks


def _trusted(sources: Iterable[Source]) -> bool:
    """Some field the value was seen in carries no ``untrusted_content`` label."""
    labels: dict[tuple[str, str], set[str]] = {}
    for source in sources:
        labels.setdefault((source.decision_id, source.pointer), set()).add(source.label)
    return any(_UNTRUSTED not in found for found in labels.values())


def _entry(value: _Value, in_prompt: bool) -> dict[str, Any]:
    return {
        "kind": value.kind, "sources": [s.as_input() for s in value.sources], "in_prompt": in_prompt,
        "in_trusted_output": _trusted(value.sources),
    }


def build(
    store: ProvenanceStore, keys: SubjectKeys, conversation: str | None, meta: ContractMetadata | None,
    call_input: Any, context: dict[str, Any], untraced_labels: list[str], reads: Reads,
) -> dict[str, Any]:
    """``input.provenance``, the members ``reads`` wants (see the module docstring). Raises
    ``DependencyUnavailable`` (503) when the remembered values cannot be read."""
    provenance: dict[str, Any] = {}
    if reads.wants("provenance.untraced_labels"):
        provenance["untraced_labels"] = untraced_labels
    wants_arguments, wants_extracted = reads.wants("provenance.arguments"), reads.wants("provenance.extracted")
    if not (wants_arguments or wants_extracted):
        return provenance
    marks = _marks(meta, call_input)
    arguments: dict[str, tuple[_Value, Any]] = {}
    extracted: dict[str, list[_Value]] = {}
    for pointer, raw in list(scalars(call_input, ""))[:MAX_SCALARS]:
        mark = marks.get(pointer)
        kind = mark.kind if mark is not None and mark.kind else ("text" if isinstance(raw, str) else "number")
        lookups, _ = value_keys(raw, mark.kind if mark else None, ())
        own = next((found for found in lookups if found[0] == _KEY_KIND.get(kind, kind)), None)
        arguments[pointer] = (_Value(kind, lookups, own), raw)
        if wants_extracted and mark is not None and mark.extract and isinstance(raw, str):
            extracted[pointer] = [_Value(k, with_host(k, v), (k, v)) for k, v in values_in(raw, mark.extract)]
    values = [value for value, _ in arguments.values()] if wants_arguments else []
    values += [v for found in extracted.values() for v in found]
    digest_of = {
        lookup: store.digest(keys.tenant, *lookup) for value in values for lookup in value.lookups
    }
    found = store.sources(keys, conversation, sorted(set(digest_of.values())))
    for value in values:
        seen: set[Source] = set()
        for lookup in value.lookups:
            for source in found.get(digest_of[lookup], ()):
                if source not in seen:
                    seen.add(source)
                    value.sources.append(source)
    prompt = _prompt(context.get("user_prompt"))
    if wants_arguments:
        provenance["arguments"] = {p: _entry(value, prompt.names(value, raw)) for p, (value, raw) in arguments.items()}
    if wants_extracted:
        provenance["extracted"] = {
            p: [{**_entry(v, v.own in prompt.values), "index": i} for i, v in enumerate(found_values)]
            for p, found_values in extracted.items()
        }
    return provenance
