"""Everything the decide pipeline and the other recorded calls talk to, built once per worker
by ``app.create_app``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.approvals.service import ApprovalService
from app.audit.interfaces import DecisionLog, DecisionLogReader
from app.auth.verifier import TokenVerifier
from app.contracts.registry import ContractRegistry
from app.decide.recorder import Recorder
from app.engine.base import PolicyEngine
from app.engine.shadow import ShadowEvaluator
from app.idempotency.store import IdempotencyStore
from app.provenance.store import ProvenanceStore
from app.receipts.signer import ReceiptSigner
from app.redis_client import RedisConnection
from app.session.reads import SessionReads
from app.session.store import SessionStore
from app.settings import Settings


@dataclass(frozen=True)
class Deps:
    """The collaborators of one worker. ``decision_log`` and ``decision_reader`` are usually one
    store implementing both interfaces (DESIGN §6), the writer wrapped in signed checkpoints
    (``app.audit.checkpoints.CheckpointingLog``); ``recorder`` appends through
    ``decision_log``. ``capability_engine`` is an engine of the same kind and policies that
    queries the capability document (``capability_path``) instead of the decision;
    ``session_reads`` asks ``engine`` which session members each tool's policy reads;
    ``provenance`` keeps the values of reported results (``input.provenance``).
    ``receipts`` signs the receipt of each decide response (None: no receipts);
    ``published_keys`` is the document of ``/.well-known/toolgate-keys``
    (``app.receipts.keys.key_document``). ``shadow`` evaluates the candidate policy beside
    ``engine`` (None: no candidate; the active policy's log-only families still report)."""

    settings: Settings
    verifier: TokenVerifier
    contracts: ContractRegistry
    engine: PolicyEngine
    redis: RedisConnection
    idempotency: IdempotencyStore
    approvals: ApprovalService
    sessions: SessionStore
    decision_log: DecisionLog
    decision_reader: DecisionLogReader
    recorder: Recorder
    capability_engine: PolicyEngine
    session_reads: SessionReads
    provenance: ProvenanceStore
    receipts: ReceiptSigner | None = None
    published_keys: dict[str, list[dict[str, str]]] = field(default_factory=lambda: {"keys": [], "checkpoint_keys": []})
    shadow: ShadowEvaluator | None = None

    def readiness_checks(self) -> dict[str, Callable[[], None]]:
        """Named probes for ``/readyz``; each raises ``ToolgateError`` when not ready."""
        return {"policy_engine": self.engine.probe, "decision_log": self.decision_log.probe}
