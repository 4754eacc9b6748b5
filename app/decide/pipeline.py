"""The decide pipeline (DESIGN §2): the ordered steps of ``POST /v1/decide``.

    decision id -> authenticate -> parse -> validate (contract) -> idempotency -> grant check
    -> policy -> approval (use the grant | open a pending approval) -> reserve -> receipt -> record

No Flask here: the web layer hands over the request facts (``DecideCall`` inside a
``Progress``) and renders the ``DecideResponse`` that comes back. Every step may end the call
with a ``ToolgateError``; every call that passed authentication is recorded (``Recorder.run``),
errors included, before anything is returned.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from app import metrics
from app.approvals.presented import Granted
from app.approvals.records import credential_digest
from app.decide import approval_outcome, policy_input, presented, reservations, validation
from app.decide.approval_outcome import ApprovalOutcome
from app.decide.deps import Deps
from app.decide.events import decide_event
from app.decide.phases import Phases
from app.decide.receipts import receipt_claims
from app.decide.stages import Authenticated, Decided, Prepared, Presented, Progress, Refusal, advance
from app.errors import ToolgateError
from app.models import DecideResponse, PolicyDecision, ToolRef
from app.vocabulary import AiSdkStatus

log = logging.getLogger(__name__)


def decide(deps: Deps, progress: Progress, phases: Phases) -> DecideResponse:
    """Run the decide pipeline for ``progress``'s call; returns the ``200`` response.

    Raises ``ToolgateError`` subclasses: ``Unauthenticated`` (401), ``ValidationFailed``
    (400/413/422), ``Conflict`` (409/422, idempotency), ``DependencyUnavailable`` (503: engine
    or Redis down, timeout, evaluation error; or the decision log cannot record the call).
    ``progress`` keeps the furthest stage reached, for the caller's log line.
    """
    received = progress.stage
    with phases.measure("auth"):
        subject = deps.verifier.verify(received.call.authorization)
    authenticated = progress.reach(advance(received, Authenticated, subject=subject))

    def describe(decided: Decided | None, error: ToolgateError | None) -> Any:
        stage = progress.stage if isinstance(progress.stage, Authenticated) else authenticated
        return decide_event(
            stage, decided, error, engine=deps.engine.name, key_hash=deps.recorder.key_hash, durations_ms=phases.ms
        )

    decided = deps.recorder.run(
        lambda: _decide_authenticated(deps, progress, authenticated, phases),
        describe,
        phases=phases,
        recorded=lambda _record: progress.mark_recorded(),
        unrecorded=lambda outcome: _release_unrecorded(deps, outcome),
    )
    return decided.response


def _decide_authenticated(deps: Deps, progress: Progress, stage: Authenticated, phases: Phases) -> Decided:
    """Steps 3-6 for an authenticated caller."""
    with phases.measure("validate"):
        parsed = progress.reach(validation.parse(stage, deps.contracts, deps.settings))
        validated = progress.reach(validation.validate(parsed, deps.settings))
    dry_run = validated.request.dry_run
    reservation = None
    if not dry_run:
        with phases.measure("idempotency"):
            reservation = reservations.check(validated, deps.idempotency)
    with phases.measure("grant"):
        validated, presented_approval = presented.check(validated, reservation, deps.approvals)
    prepared = progress.reach(advance(validated, Prepared, reservation=reservation, presented=presented_approval))
    outcome = _decision(deps, prepared, phases)
    with phases.measure("reserve"):
        allowed = outcome.decision.decision == "allow"
        idempotency = deps.idempotency.settle(reservation) if reservation is not None and allowed else None
    decision = outcome.decision
    # Unregistered tools: name and version are caller input, so one fixed label value for both.
    tool = prepared.tool
    label = (tool.qualified, tool.version) if tool.registered else ("_dynamic", "_dynamic")
    metrics.DECISIONS.labels(*label, decision.decision).inc()
    optional: dict[str, Any] = {}
    if outcome.approval is not None:
        optional["approval"] = outcome.approval
    if idempotency is not None:
        optional["idempotency"] = idempotency
    if dry_run:
        optional["dry_run"] = True
    edit = approval_outcome.edit_info(outcome.presented)
    if edit is not None:
        optional["approval_edit"] = edit
    policy_revision = decision.policy_revision or deps.engine.revision()
    if deps.receipts is not None and not dry_run:
        optional["receipt"] = deps.receipts.sign(receipt_claims(prepared, decision, outcome.presented, policy_revision))
    response = DecideResponse(
        decision=decision.decision,
        reasons=list(decision.reasons),
        decision_id=prepared.call.decision_id,
        request_id=prepared.call.request_id,
        policy_revision=policy_revision,
        tool=ToolRef(name=tool.name, version=tool.version, namespace=tool.namespace or None),
        input=prepared.display_input,
        matched_rules=list(decision.matched_rules),
        **optional,
        ai_sdk_status=ai_sdk_status(decision, outcome.presented),
    )
    metrics.note_policy_revision(response.policy_revision)
    return progress.reach(
        # The approval that let the call through may be a standing grant found after the policy.
        advance(replace(prepared, presented=outcome.presented), Decided, decision=decision, approval=outcome.approval, idempotency=idempotency, response=response)
    )


def _decision(deps: Deps, stage: Prepared, phases: Phases) -> ApprovalOutcome:
    """The policy's decision and its approval step (``approval_outcome.decide``); a refused
    presented approval is a deny without asking the policy."""
    if isinstance(stage.presented, Refusal):
        deny = PolicyDecision(decision="deny", reasons=(stage.presented.reason,))
        return ApprovalOutcome(deny, stage.presented, None)
    history = None

    def evaluate(approval: Granted | None) -> PolicyDecision:
        nonlocal history
        with phases.measure("policy"):
            if history is None:
                history = policy_input.trusted_history(stage, deps.decision_reader)
            document = policy_input.build(stage, history=history, approval=approval)
            decision = deps.engine.evaluate(document, traceparent=stage.call.traceparent)
        return decision if decision.policy_revision else decision.model_copy(update={"policy_revision": deps.engine.revision()})

    if stage.request.dry_run:
        return ApprovalOutcome(evaluate(None), stage.presented, None)
    with phases.measure("approval"):
        return approval_outcome.decide(
            stage, evaluate, deps.approvals, credential_digest=credential_digest(stage.call.authorization)
        )


def ai_sdk_status(decision: PolicyDecision, presented_approval: Presented) -> AiSdkStatus:
    """The AI SDK tool-approval status of the final decision: ``approved`` for an allow after a
    verified grant, ``not-applicable`` for any other allow, else ``denied`` / ``user-approval``."""
    if decision.decision == "allow":
        return "approved" if isinstance(presented_approval, Granted) else "not-applicable"
    return "denied" if decision.decision == "deny" else "user-approval"


def _release_unrecorded(deps: Deps, decided: Decided) -> None:
    """Give back the key a call reserved when its decision could not be recorded, so that the
    caller's retry is not blocked by a call that never got its allow."""
    reserved = decided.idempotency
    if reserved is None or reserved.state != "reserved" or decided.reservation is None:
        return
    try:
        deps.idempotency.fail(
            decided.reservation.scope, decided.subject.id, retryable=True, reason="decision not recorded",
            token=reserved.reservation_token,
        )
    except ToolgateError as exc:  # the call fails with 503 anyway; the lease will expire
        log.warning(
            "could not release the key of an unrecorded decision",
            extra={"event": "unrecorded_release_failed", "decision_id": decided.call.decision_id, "code": exc.code},
        )
