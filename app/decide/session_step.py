"""The session steps of decide (docs/session.md): before the policy, the subject's snapshot
(``input.session``, ``input.history``); after it, admission (rate limits; the limits of an
allow, reserved atomically); at the end, the call's event. And after an execution report,
its settlement: complete keeps the shares spent, fail gives them back; a lease that expires
unreported keeps them spent.

The session is keyed by the verified subject and tenant only, never by caller-supplied
context; the conversation id only picks the conversation view and per-conversation limits (a
call without one belongs to the subject's one "no conversation").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from app.approvals.presented import Granted
from app.contracts.contract import ContractMetadata, ToolContract
from app.decide.approval_outcome import ApprovalOutcome
from app.decide.stages import Prepared, conversation_id
from app.errors import ToolgateError
from app.idempotency.store import Report
from app.models import IdempotencyInfo, LimitSpec, PolicyDecision, RateLimitSpec, Subject
from app.provenance import facts
from app.provenance.results import remembered
from app.provenance.store import ProvenanceStore
from app.session.events import Event, Outcome, encode_args
from app.session.keys import SubjectKeys
from app.session.limits import UnmeasurableCall, max_units, shown, units
from app.session.reads import EVERYTHING, Reads, SessionReads
from app.session.store import SessionStore, Share
from app.session.view import Snapshot, window_name

log = logging.getLogger(__name__)


def _keys(subject: Subject) -> SubjectKeys:
    return SubjectKeys.of(subject.tenant, subject.id)


def _key_digest(stage: Prepared) -> str | None:
    """What names the call's idempotency key in its events (a digest of its record's tag)."""
    return stage.reservation.scope.tag[:16] if stage.reservation is not None else None


def reads(stage: Prepared, catalog: SessionReads, *, shadow: bool) -> Reads:
    """The session members the policy of ``stage``'s tool reads; every member when a
    ``shadow`` candidate policy is asked too (it may read others). Never raises."""
    return EVERYTHING if shadow else catalog.of_tool(stage.tool.as_input())


@dataclass(frozen=True)
class SessionFacts:
    """What the policy of one call reads of its subject's session (``reads``), the snapshot
    those members are built from (None: it reads none, nothing was read from Redis) and
    ``input.provenance`` (None: not read)."""

    reads: Reads
    snapshot: Snapshot | None
    provenance: dict[str, Any] | None = None

    def policy_input(self) -> dict[str, Any]:
        """The ``session``, ``history`` and ``provenance`` members of the policy input, each
        only when read."""
        members: dict[str, Any] = {}
        if self.provenance is not None:
            members["provenance"] = self.provenance
        if self.snapshot is None:
            return members
        if self.reads.wants("history"):
            members["history"] = self.snapshot.history()
        if self.reads.wants("session"):
            members["session"] = self.snapshot.as_input(self.reads)
        return members


def snapshot(stage: Prepared, store: SessionStore, reads: Reads, provenance: ProvenanceStore) -> SessionFacts:
    """The subject's session as the policy sees it (the members of ``reads``), the call's own
    earlier attempts (same key) left out of the counts, and ``input.provenance`` when read
    (``app.provenance.facts``); no Redis read when the policy reads none. Raises
    ``DependencyUnavailable`` (503)."""
    untraced = reads.wants("provenance.untraced_labels")
    taken = None
    if reads.any_session or untraced:
        taken = store.snapshot(
            _keys(stage.subject), conversation_id(stage.request), own_key=_key_digest(stage),
            with_recent=reads.wants("session.recent"),
        )
    built = None
    if reads.wants("provenance"):
        built = facts.build(
            provenance, _keys(stage.subject), conversation_id(stage.request),
            stage.contract.meta if stage.contract else None, stage.normalized_input, stage.request.context,
            taken.untraced_labels() if taken is not None else [], reads,
        )
    return SessionFacts(reads, taken, built)


@dataclass(frozen=True)
class Admitted:
    """The decision after admission (the policy's, or a deny when a limit refused the call)
    and the limit shares it reserved."""

    decision: PolicyDecision
    shares: tuple[Share, ...] = ()


def _deny(decision: PolicyDecision, reason: str) -> PolicyDecision:
    return PolicyDecision(
        decision="deny", reasons=(reason,), policy_revision=decision.policy_revision,
        engine_decision_id=decision.engine_decision_id,
    )


def _refusal(spec: LimitSpec, used_units: int) -> str:
    if spec.message:
        return spec.message
    return f"limit {spec.id} reached ({shown(used_units)} of {shown(max_units(spec))} used in {window_name(spec.window_s)})"


def admit(stage: Prepared, decision: PolicyDecision, store: SessionStore, *, count_rates: bool = True) -> Admitted:
    """Count the call against its rate limits (the settings default and the decision's; not
    when ``count_rates`` is false) and, for an allow that will run (not an idempotent replay),
    reserve the decision's limits.

    A dry run is admitted as the real call would be now, rate limits included, but counts and
    reserves nothing; an enforced dry run (``DecideCall.enforced``, AuthZEN) counts and
    reserves like a real call. Returns the ``Admitted`` decision: a deny naming the limit when
    one is full or the call's amount cannot be measured. Raises ``RateLimited`` (429) and
    ``DependencyUnavailable`` (503).
    """
    commit = not stage.request.dry_run or stage.call.enforced
    rates: tuple[RateLimitSpec, ...] = ()
    if count_rates:
        rates = ((store.default_rate_limit,) if store.default_rate_limit else ()) + decision.rate_limits
    replay = stage.reservation is not None and stage.reservation.stored is not None
    specs = decision.limits if decision.decision == "allow" and not replay else ()
    if not rates and not specs:
        return Admitted(decision)
    limits: list[tuple[LimitSpec, int]] = []
    unmeasurable: str | None = None
    for spec in specs:
        try:
            limits.append((spec, units(spec, stage.normalized_input)))
        except UnmeasurableCall as exc:
            log.warning("limit cannot measure the call: %s", exc, extra={"event": "limit_unmeasurable", "limit": spec.id})
            unmeasurable = f"limit {spec.id} cannot measure this call"
    admission = store.admit(
        _keys(stage.subject), decision_id=stage.call.decision_id, conversation=conversation_id(stage.request),
        rates=rates, limits=[] if unmeasurable else limits, commit=commit,
    )
    if unmeasurable:
        return Admitted(_deny(decision, unmeasurable))
    if admission.refused is not None:
        return Admitted(_deny(decision, _refusal(admission.refused, admission.used_units)))
    return Admitted(decision, admission.shares)


class Admission:
    """The admission of one call across the policy's evaluations (a call with a grant may be
    evaluated twice, without and with it): its rate limits count at the first evaluation only;
    each allow reserves its limits, an earlier evaluation's shares given back first, so the
    call holds the shares of its last allow at most."""

    def __init__(self, stage: Prepared, store: SessionStore) -> None:
        self._stage = stage
        self._store = store
        self._admitted: Admitted | None = None

    @property
    def admitted(self) -> Admitted:
        """The last evaluation's admission (nothing reserved before the first)."""
        return self._admitted or Admitted(PolicyDecision(decision="deny"))

    def admit(self, decision: PolicyDecision) -> PolicyDecision:
        """``admit`` one evaluation's ``decision``; returns the admitted decision. Raises
        ``RateLimited`` (429) and ``DependencyUnavailable`` (503)."""
        earlier = self._admitted
        if earlier is not None and earlier.shares:
            self._store.give_back(_keys(self._stage.subject), self._stage.call.decision_id, earlier.shares, linked=False)
        self._admitted = admit(self._stage, decision, self._store, count_rates=earlier is None)
        return self._admitted.decision


def give_back(stage: Prepared, admitted: Admitted, store: SessionStore) -> None:
    """Give back the shares of a call that will not run after all (its key was taken by
    another call). Best effort: a failure is logged and the shares stay spent."""
    try:
        store.give_back(_keys(stage.subject), stage.call.decision_id, admitted.shares, linked=False)
    except ToolgateError as exc:
        log.warning("could not give back limit shares", extra={"event": "limit_give_back_failed", "code": exc.code})


def note(
    stage: Prepared, outcome: ApprovalOutcome, admitted: Admitted, idempotency: IdempotencyInfo | None,
    store: SessionStore,
) -> tuple[Share, ...]:
    """Add the call's event to the session; returns the shares it now holds. Shares of a call
    that did not end allowed (its grant was used up meanwhile) or was replayed (another call
    completed the key first) are given back first. Raises ``DependencyUnavailable`` (503)."""
    keys = _keys(stage.subject)
    decision = outcome.decision.decision
    replayed = idempotency is not None and idempotency.replayed
    shares = admitted.shares
    if shares and (decision != "allow" or replayed):
        store.give_back(keys, stage.call.decision_id, shares, linked=False)
        shares = ()
    event = Event.of_call(
        stage.contract.meta if stage.contract else None, stage.normalized_input, stage.sensitive_paths,
        conversation=conversation_id(stage.request), tool=stage.tool.name, version=stage.tool.version,
        decision=decision, replayed=replayed, approved=decision == "allow" and isinstance(outcome.presented, Granted),
        mutating=stage.tool.mutating, key=_key_digest(stage),
    )
    store.note(keys, stage.call.decision_id, event, args=encode_args(stage.display_input, store.max_args_bytes), shares=shares)
    return shares


def forget(stage: Prepared, shares: tuple[Share, ...], store: SessionStore) -> None:
    """Undo ``note`` for a decision that could not be recorded (it was never answered): the
    event goes, the shares come back. Best effort, like the key's release."""
    keys = _keys(stage.subject)
    try:
        store.give_back(keys, stage.call.decision_id, shares, linked=True)
        store.forget(keys, stage.call.decision_id)
    except ToolgateError as exc:
        log.warning("could not undo the session event of an unrecorded decision",
                    extra={"event": "session_forget_failed", "decision_id": stage.call.decision_id, "code": exc.code})


def settle(
    subject: Subject, report: Report, store: SessionStore, *, contract: ToolContract | None = None, result: Any = None,
    provenance: ProvenanceStore | None = None, bound: bool = False,
) -> None:
    """Settle the session of the call an execution report is about (``report.decision_id``):
    a completion stores what its ``result`` brings by the reserved tool's ``contract`` (labels,
    trusted counterparties; none without a contract) and keeps the shares spent; a failure
    (released or final) reported within the reservation's lease gives the shares back, once; a
    failure reported after the lease expired keeps them spent (the call may have run).

    A completion ``bound`` to its reservation by the reservation token, of a tool whose
    contract has provenance marks, also has its values remembered in ``provenance``, in the
    conversation of the call it reports (never one the report names), and counts as traced
    unless the extraction's caps cut its result; the labels of the values that pushed out of
    the conversation stay untraced. Raises ``DependencyUnavailable`` (503)."""
    if report.decision_id is None:
        return
    keys = _keys(subject)
    meta = contract.meta if contract else None
    outcome = Outcome.of_result(meta, result) if report.state == "completed" else Outcome(report.state)
    if report.state == "completed" and bound and provenance is not None and meta is not None and meta.output_fields:
        traced, evicted = _remember(keys, report.decision_id, meta, result, store, provenance)
        outcome = replace(outcome, traced=traced, evicted_labels=evicted)
    store.settle(keys, report.decision_id, outcome)
    if report.state != "completed" and report.in_lease:
        store.give_back(keys, report.decision_id, store.linked_shares(keys, report.decision_id), linked=True)


def _remember(
    keys: SubjectKeys, decision_id: str, meta: ContractMetadata, result: Any, store: SessionStore,
    provenance: ProvenanceStore,
) -> tuple[bool, tuple[str, ...]]:
    """Remember the values of ``result`` in the conversation of ``decision_id``'s event;
    returns whether they were all remembered (False when the extraction's caps cut the result
    or the event left the session: its conversation is not known any more) and the labels of
    the values this pushed out of the conversation."""
    text = store.redis.run("session event", lambda client: client.hget(keys.events[1], decision_id))
    if not text:
        return False, ()
    event = Event.decode(text)
    recall = remembered(meta, result)
    evicted = provenance.remember(keys, event.conversation, tool=event.tool, decision_id=decision_id,
                                  values=recall.values)
    return recall.complete, tuple(evicted)
