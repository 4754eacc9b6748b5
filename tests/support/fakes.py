"""In-memory stand-ins for the socket-free tier (``tests/fast``): what cannot be the real
thing without a socket is replaced here, and nothing else.

- Redis: ``fakeredis`` (an in-memory Redis with Lua via lupa), so the real idempotency and
  approval Lua scripts run; Redis Cluster behaviour is covered by ``tests/unit`` on a real cluster.
- The policy engine: ``ScriptedEngine`` answers what a test scripts, to reach every pipeline
  path without depending on the shipped Rego (the real engine is covered by ``tests/api``).
- Tokens: HS256 with a test secret, verified by the real ``TokenVerifier`` (no JWKS server).
- The decision log is the real SQLite store on a temporary file (no socket involved);
  ``FailingLog`` wraps it to fail appends on demand.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fakeredis

from app.approvals.service import ApprovalService
from app.audit.interfaces import DecisionLog
from app.audit.records import AuditEvent, AuditRecord, Checkpoint
from app.audit.stores import open_decision_log
from app.auth.dev_tokens import mint_dev_token
from app.auth.verifier import TokenVerifier
from app.contracts.registry import ContractRegistry
from app.decide.deps import Deps
from app.decide.recorder import Recorder
from app.engine.base import RawResult
from app.errors import DependencyUnavailable
from app.idempotency.store import IdempotencyStore
from app.models import PolicyDecision
from app.provenance.store import ProvenanceStore
from app.redis_client import RedisConnection
from app.session.reads import SessionReads
from app.session.store import SessionStore
from app.settings import Settings

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SECRET = "fast-tier-hs256-secret-of-at-least-32-bytes"
REVISION = "scripted-revision"

Script = Callable[[dict[str, Any]], PolicyDecision]


def allow_all(_: dict[str, Any]) -> PolicyDecision:
    return PolicyDecision(decision="allow", reasons=("allowed by script",))


class ScriptedEngine:
    """A ``PolicyEngine`` whose decision is ``script(policy_input)`` (it may raise); every
    input it was asked about is kept in ``inputs``."""

    name = "embedded"

    def __init__(self, script: Script = allow_all) -> None:
        self.script = script
        self.inputs: list[dict[str, Any]] = []

    def evaluate(self, policy_input: dict[str, Any], *, traceparent: str | None = None) -> PolicyDecision:
        self.inputs.append(policy_input)
        return self.script(policy_input).model_copy(update={"policy_revision": REVISION})

    def evaluate_document(self, path: str, policy_input: dict[str, Any]) -> RawResult:
        """No other document: undefined (the session reads are then every member)."""
        return RawResult(None, False, REVISION)

    def revision(self) -> str:
        return REVISION

    def probe(self) -> None:
        return None


class FailingLog(DecisionLog):
    """The real store, whose ``append`` raises ``DependencyUnavailable`` while ``failing``."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.failing = False

    def append(self, event: AuditEvent) -> AuditRecord:
        if self.failing:
            raise DependencyUnavailable("the decision log is unavailable", log_detail="scripted failure")
        record: AuditRecord = self.store.append(event)
        return record

    def purge(self, before: dt.datetime, *, checkpoint_secret: bytes, batch_size: int = 5000) -> list[Checkpoint]:
        purged: list[Checkpoint] = self.store.purge(before, checkpoint_secret=checkpoint_secret, batch_size=batch_size)
        return purged

    def probe(self) -> None:
        self.store.probe()

    def close(self) -> None:
        self.store.close()


def settings(tmp_path: Path, **overrides: Any) -> Settings:
    """Settings of the fast tier: HS256 tokens, the shipped contracts, a temporary SQLite log
    (``synchronous=NORMAL``: durability is tested elsewhere)."""
    values: dict[str, Any] = {
        "env": "development",
        "audit_sqlite_synchronous": "NORMAL",
        "jwt_algorithms": ["HS256"],
        "jwt_hs256_secret": SECRET,
        "contracts_dir": PROJECT_ROOT / "contracts",
        "audit_dsn": str(tmp_path / "decisions.sqlite"),
        "approval_keys": "k-fast:" + "f" * 32,
        "log_level": "WARNING",
        **overrides,
    }
    return Settings(**values)


def memory_redis(config: Settings) -> RedisConnection:
    """A ``RedisConnection`` over an in-memory Redis (fakeredis, Lua included)."""
    return RedisConnection(config, pool_size=1, client=fakeredis.FakeRedis(decode_responses=True))


@functools.lru_cache(maxsize=4)
def contracts(directory: Path) -> ContractRegistry:
    """The contracts of ``directory``, loaded once per process (a registry is immutable)."""
    return ContractRegistry.load(directory)


def deps(config: Settings, engine: ScriptedEngine | None = None, capability_engine: ScriptedEngine | None = None) -> Deps:
    """``Deps`` with the real verifier, contracts, stores and recorder; fakes as listed above
    (the capability engine is scripted too: by default every tool may be used)."""
    redis = memory_redis(config)
    log = FailingLog(open_decision_log(config.audit_dsn))
    engine = engine or ScriptedEngine()
    return Deps(
        settings=config,
        verifier=TokenVerifier(config),
        contracts=contracts(config.contracts_dir),
        engine=engine,
        redis=redis,
        idempotency=IdempotencyStore.from_settings(redis, config),
        approvals=ApprovalService.from_settings(redis, config),
        sessions=SessionStore(redis, config),
        decision_log=log,
        decision_reader=log.store,
        recorder=Recorder(log, key_hash_secret=config.audit_key_hash_secret.get_secret_value()),
        capability_engine=capability_engine or ScriptedEngine(),
        session_reads=SessionReads(engine),
        provenance=ProvenanceStore(redis, config),
    )


def bearer(config: Settings, sub: str = "u-1", tenant: str = "acme", roles: tuple[str, ...] = ("admin",)) -> str:
    """An ``Authorization`` header value the fast-tier verifier accepts."""
    return "Bearer " + mint_dev_token(config, sub=sub, tenant=tenant, roles=list(roles))


def records(deps_: Deps) -> Iterator[AuditRecord]:
    """Every record of tenant acme, oldest first."""
    from app.audit.queries import DecisionQuery

    return deps_.decision_reader.iter_records(DecisionQuery(tenant="acme"))
