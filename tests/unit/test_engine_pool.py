"""The embedded engine's pool of OPA engines (``EmbeddedEngine(pool_size=N)``), with the real
engine and the shipped policies: threads share at most N engines, a reload retires the engines
of the old revision, and a closed engine refuses evaluations (fails closed)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from app.engine import embedded
from app.engine.embedded import EmbeddedEngine
from app.engine.sources import DirectorySource
from app.errors import DependencyUnavailable
from bench.engine import policy_inputs

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    target = tmp_path / "policies"
    shutil.copytree(PROJECT_ROOT / "policies", target)
    return target


def _evaluate_from_threads(engine: EmbeddedEngine, threads: int, calls: int) -> list[str]:
    decisions: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    inputs = policy_inputs()

    def run() -> None:
        try:
            for i in range(calls):
                decision = engine.evaluate(inputs[i % len(inputs)])
                with lock:
                    decisions.append(decision.decision)
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert errors == []
    return decisions


def test_threads_share_at_most_pool_size_engines(policy_dir: Path) -> None:
    engine = EmbeddedEngine(DirectorySource(policy_dir), "toolgate/decision", pool_size=2)
    try:
        decisions = _evaluate_from_threads(engine, threads=6, calls=20)
        assert len(decisions) == 120
        with engine._pool:
            engine._pool.wait_for(lambda: not engine._building, timeout=60)  # the background builder
        # The four inputs of the mix: allow, deny, user-approval, allow.
        assert set(decisions) == {"allow", "deny", "user-approval"}
        assert 1 <= engine._made <= 2 and len(engine._idle) == engine._made
    finally:
        engine.close()


def test_a_reload_retires_the_engines_of_the_old_revision(policy_dir: Path) -> None:
    engine = EmbeddedEngine(DirectorySource(policy_dir), "toolgate/decision", pool_size=2)
    try:
        before = engine.evaluate(policy_inputs()[0])
        _evaluate_from_threads(engine, threads=3, calls=5)
        old_generation = engine._snapshot.generation if engine._snapshot else None
        (policy_dir / "toolgate" / "pool_probe.rego").write_text("package toolgate.pool_probe\n\nprobe := true\n")
        assert engine.reload() is True
        after = engine.evaluate(policy_inputs()[0])
        assert after.policy_revision != before.policy_revision
        _evaluate_from_threads(engine, threads=3, calls=5)
        assert engine._made <= 2
        assert all(generation != old_generation for generation, _ in engine._idle)
    finally:
        engine.close()


def test_a_closed_engine_refuses_to_evaluate(policy_dir: Path) -> None:
    engine = EmbeddedEngine(DirectorySource(policy_dir), "toolgate/decision", pool_size=1)
    assert engine.evaluate(policy_inputs()[0]).decision == "allow"
    engine.close()
    assert engine._made == 0
    with pytest.raises(DependencyUnavailable):
        engine.evaluate(policy_inputs()[0])


def test_pool_size_must_be_positive(policy_dir: Path) -> None:
    with pytest.raises(ValueError):
        EmbeddedEngine(DirectorySource(policy_dir), "toolgate/decision", pool_size=0)


def test_no_call_compiles_a_reloaded_policy(policy_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reload compiles and prepares the new revision's first engine before publishing it,
    and further engines come from the background builder: calls (here the test's threads) never
    load a policy into an engine, so a push cannot stall another tenant's calls. The real
    ``load_into`` runs; the spy only notes which thread called it."""
    loaded_in: list[str] = []
    real_load_into = embedded.load_into

    def noting_load_into(engine: object, bundle: object) -> None:
        loaded_in.append(threading.current_thread().name)
        real_load_into(engine, bundle)  # type: ignore[arg-type]

    monkeypatch.setattr(embedded, "load_into", noting_load_into)
    engine = EmbeddedEngine(DirectorySource(policy_dir), "toolgate/decision", pool_size=2)
    try:
        engine.evaluate(policy_inputs()[0])
        (policy_dir / "toolgate" / "pool_probe.rego").write_text("package toolgate.pool_probe\n\nprobe := true\n")
        reloader = threading.Thread(target=engine.reload, name="reloader")
        reloader.start()
        reloader.join(timeout=60)
        loaded_in.clear()
        decisions = _evaluate_from_threads(engine, threads=3, calls=10)
        assert len(decisions) == 30
        assert set(loaded_in) <= {"toolgate-policy-engine"}
        assert engine.status()["generation"] == 2
    finally:
        engine.close()
