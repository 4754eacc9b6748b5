"""The ``toolgate`` commands: policy test, token, replay against a real gunicorn gateway."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from app.cli import main
from tests.support.gateway import GatewayProcess
from tests.support.paths import BANKING_CALLS, POLICY_DIR, PROJECT_ROOT


def _toolgate(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, env=env, timeout=120
    )


def test_policy_test_passes_on_shipped_policies():
    result = _toolgate("policy", "test", str(POLICY_DIR), "--runner", "embedded")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 failed" in result.stdout.splitlines()[-1]
    assert "PASS " in result.stdout


def test_policy_test_exits_1_on_a_broken_copy(tmp_path):
    broken = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, broken)
    target = broken / "tools" / "payments" / "payments_test.rego"
    target.write_text(target.read_text() + "\n\ntest_this_one_fails if {\n\tfalse\n}\n")
    result = _toolgate("policy", "test", str(broken), "--runner", "embedded")
    assert result.returncode == 1
    assert "FAIL tools.payments_test.test_this_one_fails" in result.stdout


def test_policy_test_exits_1_on_a_syntax_error(tmp_path):
    broken = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, broken)
    (broken / "toolgate" / "decision.rego").write_text("package toolgate\n\ndecision := \n")
    result = _toolgate("policy", "test", str(broken), "--runner", "embedded")
    assert result.returncode == 1
    assert "decision.rego" in result.stderr


def test_token_is_refused_in_production(monkeypatch, capsys):
    monkeypatch.setenv("TOOLGATE_ENV", "production")
    monkeypatch.setenv("TOOLGATE_JWT_HS256_SECRET", "p" * 40)
    monkeypatch.setenv("TOOLGATE_JWT_ISSUER", "https://idp.example")
    monkeypatch.setenv("TOOLGATE_JWT_AUDIENCE", "toolgate-prod")
    monkeypatch.setenv("TOOLGATE_AUDIT_KEY_HASH_SECRET", "q" * 40)
    assert main(["token", "--sub", "u", "--tenant", "t", "--role", "admin"]) == 2
    assert "production" in capsys.readouterr().err


def test_invalid_settings_are_reported_together(monkeypatch, capsys):
    monkeypatch.setenv("TOOLGATE_OPA_READ_TIMEOUT_MS", "-1")
    monkeypatch.setenv("TOOLGATE_ENGINE", "wasm")
    assert main(["token", "--sub", "u", "--tenant", "t"]) == 2
    err = capsys.readouterr().err
    assert "TOOLGATE_OPA_READ_TIMEOUT_MS" in err and "TOOLGATE_ENGINE" in err


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, redis_server):
    """The gateway under gunicorn with the development defaults (dev HS256 secret)."""
    workdir = tmp_path_factory.mktemp("gateway")
    process = GatewayProcess(
        {"TOOLGATE_REDIS_URL": redis_server.url, "TOOLGATE_AUDIT_DSN": str(workdir / "decisions.sqlite")}
    ).start()
    yield process
    process.stop()


def test_replay_banking_calls_against_gunicorn(gateway):
    result = _toolgate(
        "replay", str(BANKING_CALLS), "--url", gateway.url,
        "--sub", "emma", "--tenant", "bank-demo", "--role", "account_holder", "--json",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    report = json.loads(result.stdout)
    assert report["total"] == 45 and report["decided"] == 45 and report["errors"] == 0
    assert sum(report["by_decision"].values()) == 45
    assert [r["index"] for r in report["results"]] == list(range(45))
    assert all(r["http_status"] == 200 for r in report["results"])


def test_replay_text_output_and_failure_exit_code(gateway, tmp_path):
    calls = tmp_path / "calls.jsonl"
    calls.write_text(
        json.dumps({"tool": "readFile", "input": {"path": "/srv/reports/q1.csv"}, "roles": ["support_agent"]}) + "\n"
        + json.dumps({"tool": "readFile", "input": {"path": 7}}) + "\n"
    )
    result = _toolgate("replay", str(calls), "--url", gateway.url, "--tenant", "acme")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert "readFile" in lines[0] and "allow" in lines[0]
    assert "ERROR 422 VALIDATION_ERROR" in lines[1]
    assert any(line.startswith("errors") and line.split()[-1] == "1" for line in lines)


def test_replay_fails_when_gateway_is_down(tmp_path):
    calls = tmp_path / "calls.jsonl"
    calls.write_text(json.dumps({"tool": "readFile", "input": {"path": "/a"}}) + "\n")
    result = _toolgate("replay", str(calls), "--url", "http://127.0.0.1:9", "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["errors"] == 1


def test_replay_is_a_dry_run(gateway, redis_server):
    """Replayed calls reserve no key and create no approval: Redis stays as it was."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    before = set(client.keys("*"))
    result = _toolgate(
        "replay", str(BANKING_CALLS), "--url", gateway.url,
        "--sub", "emma", "--tenant", "bank-demo", "--role", "account_holder", "--json",
    )
    assert result.returncode == 0
    assert json.loads(result.stdout)["by_decision"]["user-approval"] > 0
    assert set(client.keys("*")) == before


def test_version_is_the_distributions(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == "toolgate 0.1.0"


def test_idempotency_show_tells_the_state_and_never_the_result(client, redis_server, monkeypatch, capsys):
    """``toolgate idempotency show`` against the real Redis the API test just used."""
    from tests.support.idempotency import decide, report, ticket, ticket_input

    monkeypatch.setenv("TOOLGATE_REDIS_URL", redis_server.url)
    tool_input = ticket_input()
    key = tool_input["clientMutationId"]
    assert decide(client, "createTicket", tool_input).get_json()["idempotency"]["state"] == "reserved"

    def show(*extra: str) -> tuple[int, dict | str]:
        code = main(["idempotency", "show", "--tenant", "acme", "--subject", "u-1", "--key", key, *extra])
        out = capsys.readouterr()
        return code, json.loads(out.out) if code == 0 else out.err

    code, shown = show()
    assert code == 0 and shown["state"] == "processing" and shown["tool"] == "createTicket"
    assert 0 < shown["lease_remaining_ms"] <= 60_000 and shown["result_bytes"] is None
    report(client, key, "complete", {"result": ticket("T-secret-id")})
    code, shown = show()
    assert code == 0 and shown["state"] == "completed" and shown["result_bytes"] > 0
    assert "T-secret-id" not in json.dumps(shown)
    code = main(["idempotency", "show", "--tenant", "acme", "--subject", "u-2", "--key", key])
    assert code == 1 and "no idempotency record" in capsys.readouterr().err
