"""Fixtures for tests through the HTTP interface: the real app with real parts.

- tokens signed with real RSA (RS256) and EC (ES256) keys, verified through a JWKS served on
  loopback (``jwks_server``);
- the real embedded OPA engine with the shipped ``policies/`` and ``contracts/``;
- a real Redis (``redis_server``, flushed per test) and a real SQLite decision log (a new file
  per test: a copy of an empty log made once, ``empty_decision_log``).

``make_app(**overrides)`` builds another app with changed settings (e.g. the OPA sidecar). Apps
whose engine settings are the defaults with the shipped policies share the session's embedded
engines (the decision and the capability document: ``shipped_engines``), and apps of the
shipped contracts one contract registry (``shipped_contracts``): they hold the loaded policies
and contracts, which no test changes in place (tests of other policies or contracts name other
folders and get their own), so sharing them changes nothing but the time spent loading.
Everything with per-test state (Redis, the decision log, the token verifier's key cache, the
approval signer) is built anew for every app.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from flask import Flask

from app import build_deps, create_app
from app.audit.stores import open_decision_log
from app.contracts.registry import ContractRegistry
from app.engine import build_engine
from app.engine.base import PolicyEngine
from app.settings import EngineSettings, PolicyBundleSettings, Settings
from tests.support.calls import AUDIENCE, ISSUER
from tests.support.jwks_server import JwksServer
from tests.support.keys import EC1, K1, jwks
from tests.support.opa_process import OpaProcess, write_bundle
from tests.support.opa_server import OpaTestServer
from tests.support.paths import CONTRACTS_DIR, POLICY_DIR


@pytest.fixture(scope="session")
def jwks_server() -> Iterator[JwksServer]:
    """A JWKS on loopback publishing the RSA key k1 and the EC key ec1."""
    with JwksServer(jwks(K1, EC1)) as server:
        yield server


#: The settings sections ``build_engine`` reads: equal values in them make equal engines.
_ENGINE_SECTIONS = (EngineSettings, PolicyBundleSettings)


def _engine_identity(settings: Settings) -> tuple[tuple[str, Any], ...]:
    """Every field of the engine's settings sections, with its value."""
    return tuple((name, getattr(settings, name)) for section in _ENGINE_SECTIONS for name in section.model_fields)


def _capability_settings(settings: Settings) -> Settings:
    """The settings of an app's capability engine (as ``build_deps`` makes them)."""
    return settings.model_copy(update={"decision_path": settings.capability_path})


class SharedEngine(NamedTuple):
    engine: PolicyEngine
    identity: tuple[tuple[str, Any], ...]

    @classmethod
    def build(cls, settings: Settings) -> SharedEngine:
        return cls(build_engine(settings), _engine_identity(settings))

    def serves(self, settings: Settings) -> bool:
        """True when ``build_engine(settings)`` would build an engine equal to this one."""
        return _engine_identity(settings) == self.identity


class SharedEngines(NamedTuple):
    decision: SharedEngine
    capability: SharedEngine


@pytest.fixture(scope="session")
def shipped_engines() -> SharedEngines:
    """The embedded engines of the shipped ``policies/`` with default engine settings (each
    loads its OPA engine once per thread, on first use): one for the decision document, one for
    the capability document."""
    settings = Settings(engine="embedded", policy_dir=POLICY_DIR)
    return SharedEngines(SharedEngine.build(settings), SharedEngine.build(_capability_settings(settings)))


@pytest.fixture(scope="session")
def shipped_contracts() -> ContractRegistry:
    """The contract registry of the shipped ``contracts/`` (plus the built-in models)."""
    return ContractRegistry.load(CONTRACTS_DIR)


@pytest.fixture(scope="session")
def empty_decision_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An SQLite decision log with the current schema and no record, made once per session.
    Each test's log is a copy of it: creating the schema costs about 35 ms, a copy 1 ms."""
    path = tmp_path_factory.mktemp("decision-log") / "empty.sqlite"
    open_decision_log(str(path)).close()  # the last connection closed: the WAL is checkpointed away
    return path


@pytest.fixture
def base_settings(jwks_server: JwksServer, redis_server, tmp_path: Path, empty_decision_log: Path) -> dict[str, Any]:
    """Keyword arguments of the test ``Settings``; tests may copy and change them. The decision
    log is a new empty SQLite file in ``tmp_path``."""
    audit_dsn = tmp_path / "decisions.sqlite"
    shutil.copyfile(empty_decision_log, audit_dsn)
    return {
        "env": "development",
        "engine": "embedded",
        "policy_dir": POLICY_DIR,
        "contracts_dir": CONTRACTS_DIR,
        "jwt_algorithms": ["RS256", "ES256"],
        "jwt_issuer": ISSUER,
        "jwt_audience": AUDIENCE,
        "jwt_jwks_url": jwks_server.jwks_url,
        "jwt_jwks_cache_s": 2,
        "jwt_jwks_refetch_cooldown_s": 10,
        # Timeouts a loaded test machine does not hit by accident (the defaults, 100 ms for
        # Redis and 50/250 ms per OPA sidecar attempt, turned slow answers into 503s when both
        # cores were busy; every decide call also reads and writes its session in Redis); the OPA
        # deadline stays 2 s, and the tests of the timeouts set their own.
        "redis_url": redis_server.url,
        "redis_socket_timeout_ms": 2000,
        "opa_connect_timeout_ms": 1000,
        "opa_read_timeout_ms": 1500,
        "audit_dsn": str(audit_dsn),
        "checkpoint_file": tmp_path / "checkpoints.jsonl",
        "approval_keys": "k-test:" + "a" * 32 + ",k-old:" + "b" * 32,
        "log_level": "WARNING",
    }


@pytest.fixture
def make_app(
    base_settings: dict[str, Any], redis_client, shipped_engines: SharedEngines, shipped_contracts: ContractRegistry
) -> Callable[..., Flask]:
    """``make_app(**overrides)`` -> a Flask app built from the test settings plus overrides; it
    gets the shared engines and registry where its settings would build equal ones."""

    def build(**overrides: Any) -> Flask:
        settings = Settings(**{**base_settings, **overrides})
        shared: dict[str, Any] = {}
        if shipped_engines.decision.serves(settings):
            shared["engine"] = shipped_engines.decision.engine
        if shipped_engines.capability.serves(_capability_settings(settings)):
            shared["capability_engine"] = shipped_engines.capability.engine
        if Path(settings.contracts_dir).resolve() == CONTRACTS_DIR.resolve():
            shared["contracts"] = shipped_contracts
        app = create_app(settings, build_deps(settings, **shared))
        app.config["TESTING"] = True
        if "engine" in shared:  # as a served worker does (app/wsgi.py); the shipped policy's verdict is cached
            app.extensions["toolgate"].session_reads.prime()
        return app

    return build


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture(scope="session")
def opa_test_server() -> Iterator[OpaTestServer]:
    """The OPA REST Data API test server of the session (loading its engine once); tests use
    ``opa_server``."""
    server = OpaTestServer(POLICY_DIR)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def opa_server(opa_test_server: OpaTestServer) -> Iterator[OpaTestServer]:
    """The OPA REST Data API test server (answers from the embedded engine; scriptable), with no
    script, no default behaviour and no recorded calls at the start and end of the test."""
    opa_test_server.reset()
    yield opa_test_server
    opa_test_server.reset()


@pytest.fixture
def sidecar_client(make_app, opa_server):
    """A client of an app that uses the OPA sidecar engine (the test server)."""
    return make_app(engine="opa", opa_url=opa_server.url).test_client()


@pytest.fixture(scope="module")
def real_opa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpaProcess]:
    """A real ``opa run --server`` serving the bundle that ``toolgate policy build`` makes of the
    shipped ``policies/`` (the sidecar of production), for one test module."""
    workdir = tmp_path_factory.mktemp("opa")
    server = OpaProcess(workdir, bundle=write_bundle(POLICY_DIR, workdir / "toolgate.tar.gz")).start()
    yield server
    server.stop()
