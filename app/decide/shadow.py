"""The shadow step of a decide call (DESIGN §3): what a shadow policy decides on the same input
as the active one, recorded and counted, never acted upon.

    start(evaluator, document)      before the active evaluation: the candidate starts on a
                                    shadow worker (None without a candidate)
    discard(pending)                the active policy is asked again (with a grant): the
                                    earlier candidate evaluation is not waited for
    finish(stage, pending, policy)  after it: the candidate's outcome (waited for until its
                                    deadline), else the active policy's log-only view

One shadow per call: the candidate when one is configured, else the ``log_only`` member of
the active decision (what its log-only families would decide). Nothing here can fail the call
or change its decision, reservation or approval: every failure is a recorded outcome.
"""

from __future__ import annotations

from typing import Any

from app import metrics
from app.decide.stages import Validated
from app.engine.shadow import PendingShadow, ShadowEvaluator
from app.models import PolicyDecision, ShadowOutcome


def start(evaluator: ShadowEvaluator | None, document: dict[str, Any]) -> PendingShadow | None:
    """Start the candidate on ``document`` (the exact input the active policy gets)."""
    return evaluator.submit(document) if evaluator is not None else None


def discard(pending: PendingShadow | None) -> None:
    """Drop ``pending`` uncounted: its call is evaluated again and the shadow starts again."""
    if pending is not None:
        pending.discard()


def finish(stage: Validated, pending: PendingShadow | None, policy: PolicyDecision) -> ShadowOutcome | None:
    """The call's shadow outcome beside ``policy`` (the active policy's decision), counted in
    ``toolgate_shadow_decisions_total`` or ``toolgate_shadow_errors_total``; None when there
    is no shadow for this call."""
    outcome = pending.outcome() if pending is not None else policy.log_only
    if outcome is None:
        return None
    if outcome.decision is None:
        metrics.SHADOW_ERRORS.labels(outcome.source, outcome.error or "unknown").inc()
        return outcome
    tool = stage.tool
    label = tool.qualified if tool.registered else "_dynamic"
    agreement = "agree" if outcome.decision == policy.decision else "disagree"
    metrics.SHADOW_DECISIONS.labels(label, policy.decision, outcome.decision, agreement).inc()
    return outcome


def recorded(outcome: ShadowOutcome | None, policy: PolicyDecision) -> dict[str, Any] | None:
    """The record's ``shadow`` member: the outcome and whether it ``agrees`` with the active
    policy's decision (None when the shadow gave none)."""
    if outcome is None:
        return None
    agrees = None if outcome.decision is None else outcome.decision == policy.decision
    return {**outcome.model_dump(mode="json"), "agrees": agrees}
