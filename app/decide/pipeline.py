"""The decide pipeline (DESIGN §2): the ordered steps of ``POST /v1/decide``.

    decision id -> authenticate -> parse -> validate (contract) -> idempotency -> grant check
    -> session snapshot -> policy (the shadow beside it), each answer admitted (rate limits;
    reserve the limits of an allow), and approval (use the grant | a standing grant | open a
    pending approval) -> reserve -> session event -> receipt -> record

No Flask here: the web layer hands over the request facts (``DecideCall`` inside a
``Progress``) and renders the ``DecideResponse`` that comes back. Every step may end the call
with a ``ToolgateError``; every call that passed authentication is recorded (``Recorder.run``),
errors included, before anything is returned.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from dataclasses import replace
from typing import Any

from app import metrics
from app.approvals.presented import Granted
from app.approvals.records import credential_digest
from app.decide import approval_outcome, policy_input, presented, reservations, session_step, shadow, validation
from app.decide.approval_outcome import ApprovalOutcome
from app.decide.deps import Deps
from app.decide.events import decide_event
from app.decide.phases import Phases
from app.decide.receipts import receipt_claims
from app.decide.stages import (
    Authenticated,
    DecideCall,
    Decided,
    Evaluation,
    Prepared,
    Presented,
    Progress,
    Refusal,
    advance,
)
from app.engine.shadow import PendingShadow
from app.errors import Forbidden, ToolgateError
from app.models import DecideResponse, IdempotencyInfo, PolicyDecision, Subject, ToolRef
from app.session.reads import EVERYTHING
from app.session.store import Share
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
        subject = _acting_subject(deps, received.call, deps.verifier.verify(received.call.authorization))
    authenticated = progress.reach(advance(received, Authenticated, subject=subject))

    def describe(decided: Decided | None, error: ToolgateError | None) -> Any:
        stage = progress.stage if isinstance(progress.stage, Authenticated) else authenticated
        return decide_event(
            stage, decided, error, engine=deps.engine.name, key_hash=deps.recorder.key_hash, durations_ms=phases.ms,
            context_fields=deps.settings.audit_context_fields,
        )

    decided = deps.recorder.run(
        lambda: _decide_authenticated(deps, progress, authenticated, phases),
        describe,
        phases=phases,
        recorded=lambda _record: progress.mark_recorded(),
        unrecorded=lambda outcome: _release_unrecorded(deps, outcome),
    )
    return decided.response


def _acting_subject(deps: Deps, call: DecideCall, caller: Subject) -> Subject:
    """The subject the call is decided for: the verified caller, or the subject a PEP's
    credential asserts. Raises ``Forbidden`` (403) for an assertion by a caller without the
    PEP role (the web layer checks it first; this keeps the pipeline closed on its own)."""
    if call.asserted_subject is None:
        return caller
    pep_role = deps.settings.authzen_pep_role
    if pep_role is None or pep_role not in caller.roles:
        raise Forbidden("the caller may not assert another subject")
    return caller.asserted(call.asserted_subject)


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
    outcome, admitted, evaluation = _decision(deps, prepared, phases)
    idempotency, shares = _reserve_and_note(deps, prepared, outcome, admitted, phases)
    decision = outcome.decision
    # Unregistered tools: name and version are caller input, so one fixed label value for both.
    tool = prepared.tool
    label = (tool.qualified, tool.version) if tool.registered else ("_dynamic", "_dynamic")
    metrics.child(metrics.DECISIONS, *label, decision.decision).inc()
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
        advance(
            replace(prepared, presented=outcome.presented), Decided, decision=decision, approval=outcome.approval,
            idempotency=idempotency, response=response, noted=shares is not None,
            # A dry run notes no event; an enforced one (AuthZEN) still holds what admission reserved.
            shares=shares if shares is not None else admitted.shares,
            evaluation=evaluation,
        )
    )


def _decision(
    deps: Deps, stage: Prepared, phases: Phases
) -> tuple[ApprovalOutcome, session_step.Admitted, Evaluation | None]:
    """The policy's decision after admission (rate limits, limits) and its approval step
    (``approval_outcome.decide``), with the shadow beside the evaluation that decided (the last
    one: the approval step may ask the policy again with a grant, and a superseded shadow is
    discarded); a refused presented approval is a deny without asking the policy (its rate
    limits count; no evaluation)."""
    if isinstance(stage.presented, Refusal):
        deny = PolicyDecision(decision="deny", reasons=(stage.presented.reason,))
        with phases.measure("limits"):
            admitted = session_step.admit(stage, deny, deps.sessions)
        return ApprovalOutcome(deny, stage.presented, None), admitted, None
    with phases.measure("session"):
        reads = session_step.reads(stage, deps.session_reads, shadow=deps.shadow is not None)
        session = session_step.snapshot(stage, deps.sessions, reads, deps.provenance)
    admission = session_step.Admission(stage, deps.sessions)
    asked: list[tuple[dict[str, Any], PolicyDecision, PendingShadow | None]] = []

    def ask(approval: Granted | None) -> PolicyDecision:
        with phases.measure("policy"):
            document = policy_input.build(stage, session=session, approval=approval)
            if asked:
                shadow.discard(asked[-1][2])
            pending = shadow.start(deps.shadow, document)
            decision = deps.engine.evaluate(document, traceparent=stage.call.traceparent)
        if not decision.policy_revision:
            decision = decision.model_copy(update={"policy_revision": deps.engine.revision()})
        asked.append((document, decision, pending))
        return decision

    def evaluate(approval: Granted | None) -> PolicyDecision:
        nonlocal session
        decision = ask(approval)
        if decision.decision != "deny" and session.reads.stale(decision.policy_revision):
            # A new policy revision decided: it may read members the old one did not declare, so
            # a rule of it that would deny may not have fired. A deny stands as it is (nothing is
            # stricter), including the deny of an unusable answer.
            with phases.measure("session"):
                session = session_step.snapshot(stage, deps.sessions, EVERYTHING, deps.provenance)
            decision = ask(approval)
        with phases.measure("limits"):
            return admission.admit(decision)

    if stage.request.dry_run:
        outcome = ApprovalOutcome(evaluate(None), stage.presented, None)
    else:
        with phases.measure("approval"):
            try:
                outcome = approval_outcome.decide(
                    stage, evaluate, deps.approvals, credential_digest=credential_digest(stage.call.authorization)
                )
            except ToolgateError:
                session_step.give_back(stage, admission.admitted, deps.sessions)
                raise
    document, decision, pending = asked[-1]
    with phases.measure("shadow") if pending is not None else nullcontext():
        evaluation = Evaluation(document, decision, shadow.finish(stage, pending, decision))
    return outcome, admission.admitted, evaluation


def _reserve_and_note(
    deps: Deps, stage: Prepared, outcome: ApprovalOutcome, admitted: session_step.Admitted, phases: Phases
) -> tuple[IdempotencyInfo | None, tuple[Share, ...] | None]:
    """An allow with a key reserves it (or replays its record); then, outside a dry run, the
    call's event joins its session. Returns the ``idempotency`` answer and the limit shares the
    event holds (None: a dry run, no event). A call that fails here (its key taken meanwhile,
    409; Redis gone, 503) gives back its shares and its key first."""
    reservation = stage.reservation
    with phases.measure("reserve"):
        try:
            allowed = outcome.decision.decision == "allow"
            idempotency = deps.idempotency.settle(reservation) if reservation is not None and allowed else None
        except ToolgateError:
            session_step.give_back(stage, admitted, deps.sessions)
            raise
    if stage.request.dry_run:
        return idempotency, None
    with phases.measure("note"):
        try:
            return idempotency, session_step.note(stage, outcome, admitted, idempotency, deps.sessions)
        except ToolgateError:
            session_step.give_back(stage, admitted, deps.sessions)
            _release_key(deps, stage, idempotency)
            raise


def ai_sdk_status(decision: PolicyDecision, presented_approval: Presented) -> AiSdkStatus:
    """The AI SDK tool-approval status of the final decision: ``approved`` for an allow after a
    verified grant, ``not-applicable`` for any other allow, else ``denied`` / ``user-approval``."""
    if decision.decision == "allow":
        return "approved" if isinstance(presented_approval, Granted) else "not-applicable"
    return "denied" if decision.decision == "deny" else "user-approval"


def _release_unrecorded(deps: Deps, decided: Decided) -> None:
    """Give back what a call took when its decision could not be recorded (its key, its
    session event and limit shares), so that the caller's retry is not blocked or counted by
    a call that never got its answer."""
    _release_key(deps, decided, decided.idempotency)
    if decided.noted:
        session_step.forget(decided, decided.shares, deps.sessions)
    elif decided.shares:
        session_step.give_back(decided, session_step.Admitted(decided.decision, decided.shares), deps.sessions)


def _release_key(deps: Deps, stage: Prepared, reserved: IdempotencyInfo | None) -> None:
    """Release the key ``stage``'s call reserved (best effort: the call fails with 503 anyway,
    and an unreleased lease expires)."""
    if reserved is None or reserved.state != "reserved" or stage.reservation is None:
        return
    try:
        deps.idempotency.fail(
            stage.reservation.scope, stage.subject.id, retryable=True, reason="decision not recorded",
            token=reserved.reservation_token,
        )
    except ToolgateError as exc:
        log.warning(
            "could not release the key of an unanswered decision",
            extra={"event": "unrecorded_release_failed", "decision_id": stage.call.decision_id, "code": exc.code},
        )
