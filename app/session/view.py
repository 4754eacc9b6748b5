"""``input.session`` (docs/session.md) and ``input.history`` built from a subject's stored events.

A call counts as **executed** when it was allowed, was not an idempotent replay, and no report
said it failed (a call without a report may have run: unknown is not free). Counts, sums and
counterparties are over executed calls; ``denied`` counts denies; ``labels`` are those every
executed call of a tool whose contract labels its result brings, reported or not (unknown is
not clean), ``untraced_labels`` those of the executed calls whose values were not traced (not
reported with the reservation token, a contract without provenance marks, or a result cut by
the extraction's caps) and those of remembered values a later report pushed out;
``trusted_counterparties`` come from completed execution reports.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from app.session.events import Event, Outcome
from app.session.reads import EVERYTHING, Reads
from app.timefmt import rfc3339_ms


@dataclass(frozen=True)
class StoredEvent:
    """An event as read back: its decision id, time (epoch ms), the event, its report (None:
    none yet) and its redacted arguments (None: not kept)."""

    decision_id: str
    time_ms: int
    event: Event
    outcome: Outcome | None
    args: dict[str, Any] | None

    @property
    def executed(self) -> bool:
        failed = self.outcome is not None and self.outcome.state != "completed"
        return self.event.decision == "allow" and not self.event.replayed and not failed

    @property
    def traced(self) -> bool:
        """Whether the values of its result were remembered (``input.provenance``)."""
        return self.outcome is not None and self.outcome.traced

    def untraced_labels(self) -> tuple[str, ...]:
        """The labels it leaves untraced, executed: its own when its values were not traced,
        and those of the remembered values its report pushed out."""
        if not self.executed:
            return ()
        evicted = self.outcome.evicted_labels if self.outcome is not None else ()
        return evicted if self.traced else self.event.labels + evicted


def window_name(seconds: int) -> str:
    """``60`` -> ``1m``, ``3600`` -> ``1h``, ``86400`` -> ``24h``, ``90`` -> ``90s``."""
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"


class _Aggregate:
    """The counts, sums and sets of one scope (the subject, or one conversation)."""

    def __init__(self, windows: dict[str, int]) -> None:
        self.calls: dict[str, dict[str, int]] = {name: {} for name in windows}
        self.denied: dict[str, dict[str, int]] = {name: {} for name in windows}
        self.amounts: dict[str, dict[str, dict[str, float]]] = {name: {} for name in windows}
        self.parties: dict[str, set[str]] = {name: set() for name in windows}
        self.approved: set[str] = set()
        self.read: set[str] = set()
        self.written: set[str] = set()
        self.labels: set[str] = set()
        self.untraced: set[str] = set()
        self.trusted: set[str] = set()

    def add(self, stored: StoredEvent, inside: list[str]) -> None:
        """Count ``stored``, which lies inside the windows named ``inside``."""
        event = stored.event
        if stored.executed:
            for name in inside:
                calls = self.calls[name]
                calls[event.tool] = calls.get(event.tool, 0) + 1
                if event.amounts:
                    sums = self.amounts[name].setdefault(event.tool, {})
                    for pointer, value in event.amounts.items():
                        sums[pointer] = sums.get(pointer, 0) + value
                self.parties[name].update(event.counterparties)
            if event.approved:
                self.approved.add(event.tool)
            self.labels.update(event.labels)
            self.untraced.update(stored.untraced_labels())
            (self.written if event.mutating else self.read).update(event.resources)
        elif event.decision == "deny":
            for name in inside:
                denied = self.denied[name]
                denied[event.tool] = denied.get(event.tool, 0) + 1
        outcome = stored.outcome
        if outcome is not None and outcome.state == "completed":
            self.labels.update(outcome.labels)
            self.trusted.update(outcome.trusted_counterparties)

    def as_input(self, wanted: Callable[[str], bool]) -> dict[str, Any]:
        """The members whose name ``wanted`` accepts."""
        members: dict[str, Callable[[], Any]] = {
            "calls": lambda: self.calls,
            "denied": lambda: self.denied,
            "amounts": lambda: {
                name: {tool: {p: _number(v) for p, v in sums.items()} for tool, sums in per_tool.items()}
                for name, per_tool in self.amounts.items()
            },
            "counterparties": lambda: {name: sorted(values) for name, values in self.parties.items()},
            "approved_tools": lambda: sorted(self.approved),
            "resources": lambda: {"read": sorted(self.read), "written": sorted(self.written)},
            "labels": lambda: sorted(self.labels),
            "untraced_labels": lambda: sorted(self.untraced),
            "trusted_counterparties": lambda: sorted(self.trusted),
        }
        return {name: build() for name, build in members.items() if wanted(name)}


def _number(value: float) -> int | float:
    """Sums as JSON numbers: whole sums as integers, others rounded to 6 decimals."""
    rounded = round(value, 6)
    return int(rounded) if rounded == int(rounded) else rounded


def _recent(stored: StoredEvent) -> dict[str, Any]:
    event = stored.event
    return {
        "decision_id": stored.decision_id,
        "time": rfc3339_ms(stored.time_ms),
        "conversation_id": event.conversation,
        "tool": event.tool,
        "version": event.version,
        "decision": event.decision,
        "replayed": event.replayed,
        "approved": event.approved,
        "outcome": stored.outcome.state if stored.outcome else None,
        "args": stored.args,
    }


@dataclass(frozen=True)
class Snapshot:
    """A subject's events newest first (at most the session's maximum; ``truncated`` when
    there were more in the retention window), read at ``now_ms``, for the call's
    ``conversation`` (None: the call has no conversation id)."""

    events: list[StoredEvent]
    truncated: bool
    now_ms: int
    conversation: str | None
    windows_s: tuple[int, ...]
    recent: int
    #: The call's idempotency key digest: the call's own earlier attempts (a retry of it) are
    #: left out of counts and sums, though ``recent`` lists them.
    own_key: str | None = None

    def _earlier(self) -> list[StoredEvent]:
        if self.own_key is None:
            return self.events
        return [e for e in self.events if e.event.key != self.own_key]

    def as_input(self, reads: Reads = EVERYTHING) -> dict[str, Any]:
        """``input.session``, the members ``reads`` wants only: one pass over the events for
        the scopes it wants."""
        windows = {window_name(seconds): seconds for seconds in self.windows_s}
        limits_ms = [(name, seconds * 1000) for name, seconds in windows.items()]
        scopes = [scope for scope in ("conversation", "subject") if reads.wants(f"session.{scope}")]
        subject, conversation = _Aggregate(windows), _Aggregate(windows)
        if scopes:
            for stored in self._earlier():
                age_ms = self.now_ms - stored.time_ms
                inside = [name for name, limit_ms in limits_ms if age_ms < limit_ms]
                subject.add(stored, inside)
                if stored.event.conversation == self.conversation:
                    conversation.add(stored, inside)
        session: dict[str, Any] = {}
        if reads.wants("session.windows"):
            session["windows"] = windows
        if "conversation" in scopes:
            session["conversation"] = {
                "id": self.conversation, **conversation.as_input(lambda m: reads.wants(f"session.conversation.{m}")),
            }
        if "subject" in scopes:
            session["subject"] = subject.as_input(lambda m: reads.wants(f"session.subject.{m}"))
        if reads.wants("session.recent"):
            session["recent"] = [_recent(e) for e in self.events[: self.recent]]
        if reads.wants("session.truncated"):
            session["truncated"] = self.truncated
        return session

    def untraced_labels(self) -> list[str]:
        """The labels of this conversation's executed calls whose values were not traced
        (``input.provenance.untraced_labels``), as ``session.conversation.untraced_labels``."""
        labels: set[str] = set()
        for stored in self._earlier():
            if stored.event.conversation == self.conversation:
                labels.update(stored.untraced_labels())
        return sorted(labels)

    def history(self) -> dict[str, Any]:
        """``input.history`` (DESIGN §3): the executed calls per tool of this conversation over
        the retention window; ``{}`` for a call without a conversation id."""
        if self.conversation is None:
            return {}
        tools: dict[str, int] = {}
        for stored in self._earlier():
            if stored.event.conversation == self.conversation and stored.executed:
                tools[stored.event.tool] = tools.get(stored.event.tool, 0) + 1
        return {
            "window_s": max(self.windows_s),
            "conversation_id": self.conversation,
            "allowed_calls": sum(tools.values()),
            "tools": dict(sorted(tools.items())),
            "truncated": self.truncated,
        }


def parse(flat: list[Any], events: list[Any], outcomes: list[Any], args: list[Any]) -> list[StoredEvent]:
    """The SNAPSHOT script's reply as ``StoredEvent``s, newest first (an id whose event is gone
    is skipped)."""
    stored = []
    for index in range(0, len(flat), 2):
        position = index // 2
        if events[position] is None:
            continue
        outcome, arg = outcomes[position], args[position] if position < len(args) else None
        stored.append(StoredEvent(
            decision_id=flat[index],
            time_ms=int(float(flat[index + 1])),
            event=_event(events[position]),
            outcome=_outcome(outcome) if outcome else None,
            args=json.loads(arg) if arg else None,
        ))
    return stored


# Stored events never change and most of a session is read again on the subject's next call,
# so each worker keeps the decoded form of the texts it read last (keyed by the text itself).
_event = lru_cache(maxsize=8192)(Event.decode)
_outcome = lru_cache(maxsize=2048)(Outcome.decode)
