"""app.metrics: the metric objects, and the exposition in single- and multi-process mode."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from prometheus_client import REGISTRY

from app import metrics
from app.settings import Settings, SettingsError, load_settings

PROJECT_ROOT = Path(__file__).resolve().parents[2]

EXPECTED_NAMES = {
    "toolgate_decisions_total", "toolgate_errors_total", "toolgate_policy_invalid_results_total",
    "toolgate_engine_errors_total", "toolgate_phase_seconds", "toolgate_idempotency_reservations_total",
    "toolgate_idempotency_replays_total", "toolgate_idempotency_conflicts_total", "toolgate_execution_reports_total",
    "toolgate_approvals_created_total", "toolgate_approvals_answered_total", "toolgate_grants_rejected_total",
    "toolgate_jwks_fetches_total", "toolgate_decision_log_failures_total",
}


def test_every_metric_of_the_issue_is_exposed():
    body, content_type = metrics.render_latest()
    text = body.decode()
    assert content_type.startswith("text/plain")
    for name in EXPECTED_NAMES:
        assert f"# HELP {name} " in text, name


def test_phase_histogram_is_in_seconds_with_sub_millisecond_buckets():
    before = REGISTRY.get_sample_value("toolgate_phase_seconds_count", {"phase": "policy"}) or 0.0
    metrics.PHASE_SECONDS.labels("policy").observe(0.0003)
    assert REGISTRY.get_sample_value("toolgate_phase_seconds_count", {"phase": "policy"}) == before + 1
    assert REGISTRY.get_sample_value("toolgate_phase_seconds_bucket", {"phase": "policy", "le": "0.0005"}) >= 1
    assert "total" in metrics.PHASES and "log" in metrics.PHASES


def test_multiprocess_exposition_sums_every_process(tmp_path: Path):
    """Two processes count into one multiprocess directory; one render sums both, as gunicorn
    workers do (the mode is chosen at import, so this runs in fresh interpreters)."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(PROJECT_ROOT)}
    count = textwrap.dedent("""
        from app import metrics
        metrics.DECISIONS.labels("readFile", "1", "allow").inc(3)
        metrics.PHASE_SECONDS.labels("total").observe(0.002)
    """)
    for _ in range(2):
        subprocess.run([sys.executable, "-c", count], env=env, check=True, timeout=60)
    render = "from app import metrics; print(metrics.render_latest()[0].decode())"
    out = subprocess.run([sys.executable, "-c", render], env=env, check=True, timeout=60, capture_output=True, text=True)
    assert 'toolgate_decisions_total{decision="allow",tool="readFile",version="1"} 6.0' in out.stdout
    assert 'toolgate_phase_seconds_count{phase="total"} 2.0' in out.stdout


def test_metrics_dir_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv("prometheus_multiproc_dir", raising=False)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "/tmp/somewhere")
    assert metrics.multiprocess_dir() == "/tmp/somewhere"
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    assert metrics.multiprocess_dir() is None


def test_metrics_token_is_off_by_default_and_must_be_long_enough():
    assert Settings().metrics_token is None
    try:
        load_settings(metrics_token="short")
    except SettingsError as exc:
        assert "TOOLGATE_METRICS_TOKEN must be at least 16 bytes" in str(exc)
    else:  # pragma: no cover - the assertion above must run
        raise AssertionError("a short metrics token was accepted")
    assert load_settings(metrics_token="m" * 16).metrics_token.get_secret_value() == "m" * 16
