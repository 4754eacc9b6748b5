"""The policy engine interface and the strict normalization of whatever an engine returns.

Normalization (DESIGN §3): only an object whose ``decision`` is exactly ``allow``, ``deny`` or
``user-approval`` counts; its ``limits`` and ``rate_limits`` (docs/session.md), when present,
must be well formed too. Anything else (a bare ``true``, ``"false"``, ``"yes"``, ``1``, ``{}``,
a list, an unknown word, reasons that are not a list of strings, no result at all) becomes a
``deny`` with the stable reason ``"no policy decision"``; the detail goes to the log and the
``toolgate_policy_invalid_results_total`` metric.

A decision document may also carry ``log_only``: what the decision would be with the policy's
log-only families counted (a decision of the same shape). It is parsed on its own into
``PolicyDecision.log_only``; a malformed one is a shadow ``invalid_result``, never a reason to
change the decision itself.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from pydantic import ValidationError

from app.bodies import release_validation_error
from app.models import DecisionWord, EscalationRule, LimitSpec, MatchedRule, PolicyDecision, RateLimitSpec, ShadowOutcome
from app.vocabulary import GRANT_SCOPES

log = logging.getLogger(__name__)

NO_POLICY_DECISION = "no policy decision"
_WORDS = ("allow", "deny", "user-approval")
_MAX_REASONS = 32
_MAX_REASON_CHARS = 500
_MAX_TTL_S = 7 * 86_400
_MAX_QUORUM = 10
_APPROVAL_MEMBERS = frozenset(
    {"reason", "approver_roles", "ttl_s", "quorum", "allow_self_approval", "requester_only", "escalation", "grant_scopes",
     "max_grant_ttl_s"}
)
_MAX_MATCHED_RULES = 64
_MAX_LIMITS = 16
Spec = TypeVar("Spec", LimitSpec, RateLimitSpec)


@dataclass(frozen=True)
class RawResult:
    """What a policy document evaluated to, before normalization: ``value`` (None when
    ``defined`` is False) and the ``revision`` of the policy that evaluated it."""

    value: Any
    defined: bool
    revision: str


@dataclass(frozen=True)
class PolicyModules:
    """The Rego modules of one policy revision: ``modules`` by path (tests may be among them:
    they are left out), raw bytes."""

    revision: str
    modules: Mapping[str, bytes]

    def content_key(self) -> str:
        """A SHA-256 hex digest of the production modules' paths and bytes."""
        digest = hashlib.sha256()
        for path in self.production_paths():
            digest.update(path.encode() + b"\0" + self.modules[path] + b"\0")
        return digest.hexdigest()

    def production_paths(self) -> list[str]:
        """The paths of the modules that are not tests, sorted."""
        return sorted(p for p in self.modules if p.endswith(".rego") and not p.endswith("_test.rego"))


class PolicyEngine(Protocol):
    """What the decide pipeline needs from a policy engine."""

    #: ``"embedded"`` or ``"opa"``; recorded in the decision log.
    name: str

    def evaluate(self, policy_input: dict[str, Any], *, traceparent: str | None = None) -> PolicyDecision:
        """Evaluate the decision document for ``policy_input``.

        Returns a normalized decision (never raises for a malformed result: that is a deny).
        Raises ``DependencyUnavailable`` on evaluation errors, conflict errors, timeouts and
        connection errors.
        """

    def evaluate_document(self, path: str, policy_input: dict[str, Any]) -> RawResult:
        """Evaluate another document of the same policy, ``data.<path>``
        (``toolgate/session_reads``), without normalizing it; the answer names the revision
        that made it. Raises ``DependencyUnavailable`` like ``evaluate``."""

    def revision(self) -> str:
        """The policy revision in force (content hash or bundle revision)."""

    def probe(self) -> None:
        """Readiness check: raises ``DependencyUnavailable`` when the engine cannot answer."""

    def status(self, *, with_detail: bool = True) -> dict[str, Any]:
        """This process's view of the policy in force (``engine``, ``revision``, ...);
        ``with_detail=False`` omits operator-only messages."""

    def workers(self) -> list[dict[str, Any]]:
        """The published status of every live worker of this gateway."""


class InvalidPolicyResult(Exception):
    """Raised inside normalization; turned into the fail-closed deny."""


def _string_list(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidPolicyResult(f"{what} is not a list of strings")
    return tuple(v[:_MAX_REASON_CHARS] for v in value[:_MAX_REASONS])


def _matched_rules(value: Any) -> tuple[MatchedRule, ...]:
    """``matched_rules: [{id, effect, message}]``, strictly: anything else is an invalid result."""
    if not isinstance(value, list):
        raise InvalidPolicyResult("matched_rules is not a list")
    rules = []
    for item in value[:_MAX_MATCHED_RULES]:
        if not isinstance(item, dict) or not isinstance(item.get("message"), str):
            raise InvalidPolicyResult("a matched rule is not {id, effect, message}")
        try:
            rules.append(MatchedRule.model_validate({**item, "message": item["message"][:_MAX_REASON_CHARS]}))
        except ValidationError as exc:
            release_validation_error(exc)
            raise InvalidPolicyResult("a matched rule is not {id, effect, message}") from None
    return tuple(rules)


def parse_decision(result: Any, policy_revision: str | None) -> PolicyDecision:
    """The ``PolicyDecision`` of a decision document (its ``log_only`` member included).
    Raises ``InvalidPolicyResult`` when it is not one."""
    if not isinstance(result, dict):
        raise InvalidPolicyResult(f"result is a {type(result).__name__}, not an object")
    word = result.get("decision")
    if not isinstance(word, str) or word not in _WORDS:
        raise InvalidPolicyResult("decision is missing or not one of allow, deny, user-approval")
    if "reasons" in result:
        reasons = _string_list(result["reasons"], "reasons")
    elif isinstance(result.get("reason"), str):
        reasons = (result["reason"][:_MAX_REASON_CHARS],)
    elif "reason" in result:
        raise InvalidPolicyResult("reason is not a string")
    else:
        reasons = ()
    approval = result.get("approval")
    fields: dict[str, Any] = {"matched_rules": _matched_rules(result.get("matched_rules", []))}
    if approval is not None:
        if not isinstance(approval, dict):
            raise InvalidPolicyResult("approval is not an object")
        if "reason" in approval:
            if not isinstance(approval["reason"], str):
                raise InvalidPolicyResult("approval.reason is not a string")
            fields["approval_reason"] = approval["reason"][:_MAX_REASON_CHARS]
        if "approver_roles" in approval:
            fields["approver_roles"] = _string_list(approval["approver_roles"], "approval.approver_roles")
        if "ttl_s" in approval:
            fields["approval_ttl_s"] = _whole(approval["ttl_s"], "approval.ttl_s", 1, _MAX_TTL_S)
        fields.update(_approval_rules(approval))
    fields["limits"] = _specs(result, "limits", LimitSpec)
    fields["rate_limits"] = _specs(result, "rate_limits", RateLimitSpec)
    if "log_only" in result:
        fields["log_only"] = _log_only(result["log_only"], policy_revision)
    return PolicyDecision(decision=cast(DecisionWord, word), reasons=reasons, policy_revision=policy_revision, **fields)


def shadow_of(decision: PolicyDecision, source: str) -> ShadowOutcome:
    """``decision`` as a shadow outcome of ``source`` (``candidate`` or ``log_only``)."""
    return ShadowOutcome.model_validate({
        "source": source, "revision": decision.policy_revision, "decision": decision.decision,
        "reasons": decision.reasons, "matched_rules": decision.matched_rules,
    })


def _log_only(value: Any, policy_revision: str | None) -> ShadowOutcome:
    """The ``log_only`` member of a decision document as a shadow outcome (a malformed one:
    ``invalid_result``)."""
    try:
        view = value if not isinstance(value, dict) else {k: v for k, v in value.items() if k != "log_only"}
        return shadow_of(parse_decision(view, policy_revision), "log_only")
    except InvalidPolicyResult as exc:
        log.warning("invalid log_only view: %s", exc, extra={"event": "shadow_result_invalid", "detail": str(exc)})
        return ShadowOutcome(source="log_only", revision=policy_revision, error="invalid_result")


def _whole(value: Any, what: str, low: int, high: int) -> int:
    """An integer (never a bool or a float) from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidPolicyResult(f"{what} is not an integer from {low} to {high}")
    return value


def _approval_rules(approval: dict[str, Any]) -> dict[str, Any]:
    """The rules of an approval beyond reason, roles and TTL (DESIGN §5), strictly checked:

    - ``quorum``: 1-10 distinct approvers must approve (default 1);
    - ``allow_self_approval``: ``true`` lets the requester confirm her own call, with a
      step-up credential only (default ``false``);
    - ``requester_only``: ``true``: no one but the requester may see or answer the approval
      (with ``allow_self_approval``: her own step-up confirmation; default ``false``);
    - ``escalation``: ``{"after_s": 1..7 days, "roles": [string, ...]}``: unanswered after
      ``after_s``, the escalation roles are notified and may answer too;
    - ``grant_scopes``: the grant scopes an approver may choose, a subset of ``once``,
      ``conversation``, ``duration`` (default ``["once"]``);
    - ``max_grant_ttl_s``: the longest a scoped grant may stand (default: the approval's TTL).
    """
    unknown = sorted(set(approval) - _APPROVAL_MEMBERS)
    if unknown:
        raise InvalidPolicyResult(f"approval has unknown members {unknown[:5]}")
    rules: dict[str, Any] = {}
    if "quorum" in approval:
        rules["approval_quorum"] = _whole(approval["quorum"], "approval.quorum", 1, _MAX_QUORUM)
    if "allow_self_approval" in approval:
        if not isinstance(approval["allow_self_approval"], bool):
            raise InvalidPolicyResult("approval.allow_self_approval is not a boolean")
        rules["approval_self_approval"] = approval["allow_self_approval"]
    if "requester_only" in approval:
        if not isinstance(approval["requester_only"], bool):
            raise InvalidPolicyResult("approval.requester_only is not a boolean")
        rules["approval_requester_only"] = approval["requester_only"]
    if "escalation" in approval:
        escalation = approval["escalation"]
        if not isinstance(escalation, dict) or set(escalation) != {"after_s", "roles"}:
            raise InvalidPolicyResult("approval.escalation is not an object of after_s and roles")
        roles = _string_list(escalation["roles"], "approval.escalation.roles")
        if not roles:
            raise InvalidPolicyResult("approval.escalation.roles is empty")
        rules["approval_escalation"] = EscalationRule(
            after_s=_whole(escalation["after_s"], "approval.escalation.after_s", 1, _MAX_TTL_S), roles=roles
        )
    if "grant_scopes" in approval:
        scopes = _string_list(approval["grant_scopes"], "approval.grant_scopes")
        if not scopes or not set(scopes) <= set(GRANT_SCOPES):
            raise InvalidPolicyResult(f"approval.grant_scopes is not a non-empty subset of {list(GRANT_SCOPES)}")
        rules["approval_grant_scopes"] = tuple(s for s in GRANT_SCOPES if s in scopes)
    if "max_grant_ttl_s" in approval:
        rules["approval_max_grant_ttl_s"] = _whole(approval["max_grant_ttl_s"], "approval.max_grant_ttl_s", 1, 30 * 86_400)
    return rules


def _specs(result: dict[str, Any], member: str, model: type[Spec]) -> tuple[Spec, ...]:
    """The ``limits`` / ``rate_limits`` of a result (absent: none); a malformed one makes the
    whole result invalid, so a limit the policy meant can never be dropped silently."""
    items = result.get(member, [])
    if not isinstance(items, list) or len(items) > _MAX_LIMITS:
        raise InvalidPolicyResult(f"{member} is not a list of at most {_MAX_LIMITS} objects")
    try:
        specs = tuple(model.model_validate(item) for item in items)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"]
        release_validation_error(exc)
        raise InvalidPolicyResult(f"{member}: {problem}") from None
    if len({spec.id for spec in specs}) != len(specs):
        raise InvalidPolicyResult(f"{member} names one id twice")
    return specs


def normalize(
    result: Any, *, defined: bool = True, engine_decision_id: str | None = None, policy_revision: str | None = None
) -> PolicyDecision:
    """Turn a raw engine result into a ``PolicyDecision``; anything unusable is a deny.

    ``defined=False`` means the engine answered without a result (undefined document).
    ``policy_revision``: the revision that evaluated (kept on the deny too).
    """
    from app import metrics

    try:
        if not defined:
            raise InvalidPolicyResult("the decision document is undefined (no result)")
        decision = parse_decision(result, policy_revision)
    except InvalidPolicyResult as exc:
        log.warning("no policy decision: %s", exc, extra={"event": "policy_result_invalid", "detail": str(exc)})
        metrics.POLICY_INVALID_RESULTS.inc()
        return PolicyDecision(
            decision="deny",
            reasons=(NO_POLICY_DECISION,),
            normalized_from_invalid=True,
            engine_decision_id=engine_decision_id,
            policy_revision=policy_revision,
        )
    if engine_decision_id:
        decision = decision.model_copy(update={"engine_decision_id": engine_decision_id})
    return decision
