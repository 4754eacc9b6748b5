"""``input.session`` (docs/session.md) and ``input.history`` built from a subject's stored events.

A call counts as **executed** when it was allowed, was not an idempotent replay, and no report
said it failed (a call without a report may have run: unknown is not free). Counts, sums and
counterparties are over executed calls; ``denied`` counts denies; ``labels`` and
``trusted_counterparties`` come from completed execution reports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from app.session.events import Event, Outcome
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


def window_name(seconds: int) -> str:
    """``60`` -> ``1m``, ``3600`` -> ``1h``, ``86400`` -> ``24h``, ``90`` -> ``90s``."""
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"


def _scope_view(events: list[StoredEvent], windows: dict[str, int], now_ms: int) -> dict[str, Any]:
    calls: dict[str, dict[str, int]] = {name: {} for name in windows}
    denied: dict[str, dict[str, int]] = {name: {} for name in windows}
    amounts: dict[str, dict[str, dict[str, float]]] = {name: {} for name in windows}
    parties: dict[str, set[str]] = {name: set() for name in windows}
    approved: set[str] = set()
    read: set[str] = set()
    written: set[str] = set()
    labels: set[str] = set()
    trusted: set[str] = set()
    for stored in events:
        event, age_ms = stored.event, now_ms - stored.time_ms
        inside = [name for name, seconds in windows.items() if age_ms < seconds * 1000]
        if stored.executed:
            for name in inside:
                calls[name][event.tool] = calls[name].get(event.tool, 0) + 1
                sums = amounts[name].setdefault(event.tool, {})
                for pointer, value in event.amounts.items():
                    sums[pointer] = sums.get(pointer, 0) + value
                parties[name].update(event.counterparties)
            if event.approved:
                approved.add(event.tool)
            (written if event.mutating else read).update(event.resources)
        elif event.decision == "deny":
            for name in inside:
                denied[name][event.tool] = denied[name].get(event.tool, 0) + 1
        if stored.outcome is not None and stored.outcome.state == "completed":
            labels.update(stored.outcome.labels)
            trusted.update(stored.outcome.trusted_counterparties)
    return {
        "calls": calls,
        "denied": denied,
        "amounts": {name: {tool: {p: _number(v) for p, v in sums.items()} for tool, sums in per_tool.items() if sums}
                    for name, per_tool in amounts.items()},
        "counterparties": {name: sorted(values) for name, values in parties.items()},
        "approved_tools": sorted(approved),
        "resources": {"read": sorted(read), "written": sorted(written)},
        "labels": sorted(labels),
        "trusted_counterparties": sorted(trusted),
    }


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

    def as_input(self) -> dict[str, Any]:
        """``input.session``."""
        windows = {window_name(seconds): seconds for seconds in self.windows_s}
        mine = [e for e in self.events if e.event.conversation == self.conversation]
        return {
            "windows": windows,
            "conversation": {"id": self.conversation, **_scope_view(mine, windows, self.now_ms)},
            "subject": _scope_view(self.events, windows, self.now_ms),
            "recent": [_recent(e) for e in self.events[: self.recent]],
            "truncated": self.truncated,
        }

    def history(self) -> dict[str, Any]:
        """``input.history`` (DESIGN §3): the executed calls per tool of this conversation over
        the retention window; ``{}`` for a call without a conversation id."""
        if self.conversation is None:
            return {}
        tools: dict[str, int] = {}
        for stored in self.events:
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
            event=Event.decode(events[position]),
            outcome=Outcome.decode(outcome) if outcome else None,
            args=json.loads(arg) if arg else None,
        ))
    return stored
