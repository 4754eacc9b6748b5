"""What one decided call leaves in its subject's session, and what its execution report adds.

An ``Event`` is stored as compact JSON under the call's decision id (with its time as the
timeline score); an ``Outcome`` is stored beside it when the tool service reports. Values are
read from the validated, normalized input through the contract's marks (``amount_fields``,
``counterparty_fields``, ``resource_fields``); values at the contract's sensitive paths are
never kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from app.contracts.contract import ContractMetadata, is_sensitive
from app.session.pointers import values_at

#: The most values of one kind one call contributes, and the longest value kept (characters).
MAX_VALUES = 32
MAX_VALUE_CHARS = 256
OutcomeState = Literal["completed", "failed", "released"]


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _names(document: Any, pointers: tuple[str, ...], sensitive: tuple[str, ...]) -> tuple[str, ...]:
    """The distinct strings (and integers, as text) that ``pointers`` reach in ``document``,
    in order, sensitive paths skipped, at most ``MAX_VALUES`` of at most ``MAX_VALUE_CHARS``."""
    found: list[str] = []
    for pointer in pointers:
        for path, value in values_at(document, pointer):
            if is_sensitive(path, sensitive) or isinstance(value, bool):
                continue
            text = str(value) if isinstance(value, (str, int)) else ""
            if text and len(text) <= MAX_VALUE_CHARS and text not in found:
                found.append(text)
    return tuple(found[:MAX_VALUES])


def _amounts(document: Any, pointers: tuple[str, ...], sensitive: tuple[str, ...]) -> dict[str, float]:
    """Per amount pointer, the sum of the numbers it reaches (sensitive paths skipped)."""
    sums: dict[str, float] = {}
    for pointer in pointers:
        numbers = [
            value for path, value in values_at(document, pointer)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not is_sensitive(path, sensitive)
        ]
        if numbers:
            sums[pointer] = float(sum(numbers))
    return sums


@lru_cache(maxsize=1024)
def _labels_of(meta: ContractMetadata) -> tuple[str, ...]:
    """The labels a result of the tool may bring, sorted (per contract, computed once)."""
    return tuple(sorted(meta.field_labels()))


@dataclass(frozen=True)
class Event:
    """One decided call: ``conversation`` None for a call without a conversation id;
    ``decision`` the final word; ``replayed`` an idempotent replay (it did not run again);
    ``approved`` allowed after a verified approval; ``amounts`` per amount pointer; ``key``
    names the call's idempotency key (a digest, None without a key), so that a retry of the
    same call does not count its own earlier attempts."""

    conversation: str | None
    tool: str
    version: str
    decision: str
    replayed: bool
    approved: bool
    mutating: bool
    amounts: dict[str, float]
    counterparties: tuple[str, ...]
    resources: tuple[str, ...]
    key: str | None = None
    #: The labels the tool's result may bring (``ContractMetadata.field_labels``): an allowed
    #: call contributes them to its conversation, reported or not (unknown is not clean).
    labels: tuple[str, ...] = ()

    @classmethod
    def of_call(
        cls, meta: ContractMetadata | None, normalized_input: dict[str, Any], sensitive: tuple[str, ...], **facts: Any
    ) -> Event:
        """The event of a call with ``meta``'s marks read from its input (None: an
        unregistered tool, no marks); ``facts`` are the other fields."""
        if meta is None:
            return cls(amounts={}, counterparties=(), resources=(), **facts)
        return cls(
            amounts=_amounts(normalized_input, meta.amount_fields, sensitive),
            counterparties=_names(normalized_input, meta.counterparty_fields, sensitive),
            resources=_names(normalized_input, meta.resource_fields, sensitive),
            labels=_labels_of(meta),
            **facts,
        )

    def encode(self) -> str:
        return _compact({
            "c": self.conversation, "t": self.tool, "v": self.version, "d": self.decision, "r": self.replayed,
            "a": self.approved, "m": self.mutating, "amt": self.amounts, "cp": list(self.counterparties),
            "res": list(self.resources), "k": self.key, **({"ol": list(self.labels)} if self.labels else {}),
        })

    @classmethod
    def decode(cls, text: str) -> Event:
        raw = json.loads(text)
        return cls(
            conversation=raw["c"], tool=raw["t"], version=raw["v"], decision=raw["d"], replayed=raw["r"],
            approved=raw["a"], mutating=raw["m"], amounts=raw["amt"], counterparties=tuple(raw["cp"]),
            resources=tuple(raw["res"]), key=raw.get("k"), labels=tuple(raw.get("ol", ())),
        )


def _untrusted_field(meta: ContractMetadata, pointer: str) -> bool:
    """Whether a mark labelled ``untrusted_content`` or marked free text covers ``pointer``."""
    return any(
        (pointer == m.pointer or pointer.startswith(m.pointer + "/")) and ("untrusted_content" in m.labels or m.extract)
        for m in meta.output_fields
    )


@dataclass(frozen=True)
class Outcome:
    """An execution report: its state, the ``labels`` a completed result brought (the
    contract's ``output_labels``), the counterparties named by a trusted result, whether its
    values were ``traced`` (all remembered for ``input.provenance``), and the labels of the
    values remembering them pushed out of the conversation (``evicted_labels``: untraced from
    then on)."""

    state: OutcomeState
    labels: tuple[str, ...] = ()
    trusted_counterparties: tuple[str, ...] = ()
    traced: bool = False
    evicted_labels: tuple[str, ...] = ()

    @classmethod
    def of_result(cls, meta: ContractMetadata | None, result: Any) -> Outcome:
        """The outcome of a completed call whose tool has ``meta``. A result is trusted unless
        the contract labels it ``untrusted_content``; only a trusted result's counterparties
        (``output_counterparty_fields``) are kept, and of those only the ones no
        ``untrusted_content`` or free-text mark (``output_fields``) covers: a value is as
        trusted as the field it came from, never more."""
        if meta is None:
            return cls("completed")
        trusted = "untrusted_content" not in meta.output_labels
        fields = tuple(p for p in meta.output_counterparty_fields if not _untrusted_field(meta, p))
        named = _names(result, fields, ()) if trusted else ()
        return cls("completed", tuple(meta.output_labels), named)

    def encode(self) -> str:
        return _compact({"s": self.state, "l": list(self.labels), "tcp": list(self.trusted_counterparties),
                         **({"tr": True} if self.traced else {}),
                         **({"ev": list(self.evicted_labels)} if self.evicted_labels else {})})

    @classmethod
    def decode(cls, text: str) -> Outcome:
        raw = json.loads(text)
        return cls(raw["s"], tuple(raw["l"]), tuple(raw["tcp"]), bool(raw.get("tr")), tuple(raw.get("ev", ())))


def encode_args(display_input: dict[str, Any], max_bytes: int) -> str:
    """The redacted arguments of a recent call as stored, '' when larger than ``max_bytes``."""
    text = _compact(display_input)
    return text if len(text.encode()) <= max_bytes else ""
