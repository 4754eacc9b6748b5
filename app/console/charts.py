"""Charts of the auditor view, computed from decision records and drawn as inline SVG by the
templates (no script, no build step): decisions over time by outcome (stacked bars per bucket)
and the top denied tools and deny rules (horizontal bars): the rule ids of the policy's
``matched_rules``, or the reasons of a record that names none."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from app.audit.records import AuditRecord

OUTCOMES = ("allow", "deny", "user-approval", "error")
CHART_W, CHART_H = 720, 180


@dataclass
class Bar:
    """One stacked bar: its label and the count per outcome, with rectangles to draw."""

    label: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    rects: list[tuple[str, float, float, float, float]] = field(default_factory=list)


@dataclass
class Charts:
    """What the auditor page draws; ``records`` how many records were read (at most ``limit``)."""

    bars: list[Bar]
    top_tools: list[tuple[str, int, float]]
    top_rules: list[tuple[str, int, float]]
    records: int
    truncated: bool
    max_count: int


def outcome(record: AuditRecord) -> str:
    return "error" if record.error_code else (record.decision or "error")


def build(records: Iterable[AuditRecord], *, since: dt.datetime, until: dt.datetime, buckets: int = 24, limit: int = 20_000) -> Charts:
    """Bucket the decide records of ``[since, until)`` into ``buckets`` bars by outcome and count
    the denied tools and deny rules (top 8 each)."""
    span = (until - since) / buckets
    bars = [Bar(label=(since + span * i).strftime("%m-%d %H:%M UTC")) for i in range(buckets)]
    tools: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    read = 0
    truncated = False
    for record in records:
        if read >= limit:
            truncated = True
            break
        read += 1
        if record.event not in ("decide", "decide_dry_run"):
            continue
        index = min(buckets - 1, max(0, int((record.time - since) / span)))
        bars[index].counts[outcome(record)] += 1
        if record.decision == "deny":
            tools[record.tool or "-"] += 1
            denying = [r["id"] for r in record.matched_rules if r.get("effect") == "deny" and r.get("id")]
            rules.update(denying[:3] or record.reasons[:3])
    top = max([sum(b.counts.values()) for b in bars] + [1])
    width = CHART_W / buckets
    for i, bar in enumerate(bars):
        y = float(CHART_H)
        for name in OUTCOMES:
            height = CHART_H * bar.counts[name] / top
            if height:
                y -= height
                bar.rects.append((name, i * width + 1, y, width - 2, height))
    return Charts(bars, _scaled(tools), _scaled(rules), read, truncated, top)


def _scaled(counter: Counter[str]) -> list[tuple[str, int, float]]:
    top = counter.most_common(8)
    most = top[0][1] if top else 1
    return [(name, count, 100.0 * count / most) for name, count in top]
