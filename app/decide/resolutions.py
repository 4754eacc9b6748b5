"""An operator's resolution of an idempotency record whose outcome is unknown
(``toolgate idempotency resolve``), recorded like a decide call."""

from __future__ import annotations

import getpass
import uuid

from app.audit.interfaces import DecisionLog
from app.decide.events import RequestFacts, resolution_event
from app.decide.recorder import Recorder
from app.idempotency.keys import Scope
from app.idempotency.store import IdempotencyStore, Resolution


def resolve(store: IdempotencyStore, log: DecisionLog, *, key_hash_secret: str, scope: Scope, resolution: Resolution) -> Resolution:
    """Settle the record at ``scope`` as ``resolution`` on behalf of the local user, and record
    it. A refused resolution changed nothing and leaves no record. Raises what
    ``IdempotencyStore.resolve`` raises, and ``DependencyUnavailable`` when the record cannot be
    written."""
    recorder = Recorder(log, key_hash_secret=key_hash_secret)
    request = RequestFacts(request_id=f"cli-{uuid.uuid4().hex}", trace_id=None)
    return recorder.run(
        lambda: store.resolve(scope, resolution),
        lambda state, _error: resolution_event(
            request, scope.tenant, getpass.getuser(), recorder.key_hash(scope.key), state
        ) if state else None,
    )
