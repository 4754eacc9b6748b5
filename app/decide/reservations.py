"""Step 5 of decide (DESIGN §4): the call's idempotency key, checked before the policy (a
conflict or a Redis outage ends the call there, before OPA is asked) and settled after an
``allow`` (reserve the key, or replay its settled record)."""

from __future__ import annotations

from app.decide.stages import Validated
from app.decide.validation import require_fingerprint
from app.idempotency.keys import Scope, call_key
from app.idempotency.store import IdempotencyStore, PendingCall


def check(stage: Validated, store: IdempotencyStore) -> PendingCall | None:
    """The call's key and its record, before the policy runs.

    Returns None for a call without a key (read-only or unregistered tools; Redis is not
    touched), else the ``PendingCall`` to settle after an allow. Raises ``ValidationFailed``
    (400 missing/malformed key, checked before Redis; 422 input that cannot be fingerprinted),
    ``Conflict`` (see ``IdempotencyStore.inspect``) and ``DependencyUnavailable`` (503).
    """
    key = call_key(stage.call.idempotency_key, stage.contract, stage.normalized_input)
    if key is None:
        return None
    fp = require_fingerprint(stage)
    scope = Scope(stage.subject.tenant, stage.subject.id, key)
    meta = stage.contract.meta if stage.contract else None
    retry_safe = bool(meta and meta.retry_safe)
    return PendingCall(
        scope=scope,
        fingerprint=fp,
        subject_id=stage.subject.id,
        tool=stage.tool.qualified,
        version=stage.tool.version,
        lease_s=(meta.lease_s if meta and meta.lease_s else store.lease_s),
        retry_safe=retry_safe,
        stored=store.inspect(scope, fp, retry_safe=retry_safe),
        decision_id=stage.call.decision_id,
    )
