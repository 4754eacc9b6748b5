"""``toolgate audit ...`` as an operator runs it (in-process ``app.cli.main`` with the settings in
the environment, real SQLite and PostgreSQL): a mistyped store path or an unknown tenant is an
error that creates nothing; ``verify`` needs a checkpoint key and says since when the log
cannot be trusted; ``checkpoint write`` registers chains written before checkpoints were on;
caller text never reaches the terminal raw."""

from __future__ import annotations

import json
import sqlite3
import unicodedata
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from app.audit.checkpoints import CheckpointingLog, CheckpointWriter, checkpoint_ring, checkpoint_sinks
from app.audit.records import AuditEvent
from app.audit.stores import open_decision_log, open_from_settings
from app.cli import main
from app.receipts.keys import KeyRing, key_document
from app.settings import load_settings
from tests.support.postgres import fresh_database
from tests.unit.test_audit_chain import raw_sql
from tests.unit.test_audit_checkpoints import truncate


@pytest.fixture
def dsn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = str(tmp_path / "log" / "decisions.sqlite")
    monkeypatch.setenv("TOOLGATE_AUDIT_DSN", path)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["audit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def gateway_log():
    """The decision log as the gateway writes it: the settings' store, checkpoints on."""
    settings = load_settings()
    ring = checkpoint_ring(settings)
    assert ring is not None
    return CheckpointingLog(open_from_settings(settings), CheckpointWriter(ring, checkpoint_sinks(settings, None)),
                            interval_s=86_400)


def event(tenant: str = "acme", i: int = 0, reasons: tuple[str, ...] = ("allowed by policy",)) -> AuditEvent:
    return AuditEvent(event="decide", tenant=tenant, request_id=f"req-{i}", subject_id="u-1", tool="readFile",
                      version="1", decision="allow", reasons=reasons, input={"path": f"/srv/{i}"})


@pytest.mark.parametrize("command", [
    ["query"], ["query", "--tenant", "acme"], ["export", "--since", "2026-01-01", "--until", "2027-01-01"],
    ["verify"], ["verify", "--chain-only"], ["purge", "--before", "2026-01-01"], ["checkpoint", "write"],
])
def test_a_mistyped_store_path_is_an_error_and_creates_nothing(capsys, tmp_path, monkeypatch, command):
    missing = tmp_path / "typo" / "decisons.sqlite"
    monkeypatch.setenv("TOOLGATE_AUDIT_DSN", str(missing))
    code, out, err = run(capsys, *command)
    assert code == 2 and out == ""
    assert f"no decision log at {missing}" in err
    assert not missing.parent.exists()


def test_a_file_or_database_without_a_decision_log_is_an_error(capsys, tmp_path, monkeypatch):
    other = tmp_path / "other-app.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (x TEXT)")
    conn.close()
    monkeypatch.setenv("TOOLGATE_AUDIT_DSN", str(other))
    code, _, err = run(capsys, "verify")
    assert code == 2 and "holds no toolgate decision log" in err
    conn = sqlite3.connect(other)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["notes"]
    conn.close()
    empty_schema = fresh_database()
    monkeypatch.setenv("TOOLGATE_AUDIT_DSN", empty_schema)
    code, _, err = run(capsys, "query", "--tenant", "acme")
    assert code == 2 and "holds no toolgate decision log" in err and "PostgreSQL database postgres" in err
    with psycopg.connect(empty_schema) as conn:
        assert conn.execute("SELECT to_regclass('decision_records')").fetchone()[0] is None


def test_an_unknown_tenant_is_an_error(capsys, dsn):
    log = gateway_log()
    log.append(event())
    log.close()
    for command in (["query", "--tenant", "acmee"], ["verify", "--tenant", "acmee"],
                    ["export", "--tenant", "acmee", "--since", "2020-01-01", "--until", "2100-01-01"]):
        code, out, err = run(capsys, *command)
        assert code == 2 and out == "", command
        assert "unknown tenant 'acmee': the decision log has no chain for it" in err
    code, out, _ = run(capsys, "verify", "--tenant", "acme")
    assert code == 0 and out.startswith("ok: 1 chains, 1 records intact")


def test_a_bare_tool_name_finds_its_namespaced_records_or_is_refused_when_ambiguous(capsys, dsn):
    log = gateway_log()
    for i, tool in enumerate(["travel/create_calendar_event", "ops/restart", "mail/restart", "readFile", "ns/readxfile"]):
        log.append(replace(event(i=i), tool=tool))
    log.close()
    code, out, err = run(capsys, "query", "--tool", "create_calendar_event", "--format", "jsonl")
    assert code == 0 and [json.loads(line)["tool"] for line in out.splitlines()] == ["travel/create_calendar_event"]
    assert "--tool create_calendar_event: the log names it travel/create_calendar_event" in err
    code, out, err = run(capsys, "query", "--tool", "restart")
    assert code == 2 and out == ""
    assert "--tool 'restart' is in several namespaces (mail/restart, ops/restart): pass one of them" in err
    code, out, _ = run(capsys, "query", "--tool", "ops/restart", "--format", "jsonl")
    assert code == 0 and len(out.splitlines()) == 1
    code, out, err = run(capsys, "query", "--tool", "read_file", "--format", "jsonl")  # "_" is no wildcard
    assert code == 0 and out == "" and err == ""


def test_verify_needs_a_checkpoint_key_in_production(capsys, dsn, monkeypatch):
    open_decision_log(dsn).close()
    for name, value in {"ENV": "production", "JWT_HS256_SECRET": "p" * 40, "JWT_ISSUER": "https://idp.example",
                        "JWT_AUDIENCE": "toolgate-prod", "AUDIT_KEY_HASH_SECRET": "q" * 40,
                        "AUTHZEN_PDP_URL": "https://toolgate.example"}.items():
        monkeypatch.setenv(f"TOOLGATE_{name}", value)
    code, _, err = run(capsys, "verify")
    assert code == 2 and "no checkpoint verification key" in err and "--chain-only" in err
    code, out, _ = run(capsys, "verify", "--chain-only")
    assert code == 0 and "hash chains only: a truncated tail, a deleted tenant or a re-hashed chain is not detected" in out


def test_verify_with_a_key_document_and_says_since_when(capsys, dsn, tmp_path):
    log = gateway_log()
    records = [log.append(event(i=i)) for i in range(3)]
    log.flush()
    records += [log.append(event(i=i)) for i in range(3, 6)]
    log.flush()
    log.close()
    published = tmp_path / "keys.json"
    published.write_text(json.dumps(key_document(None, checkpoint_ring(load_settings()).public)))
    code, out, err = run(capsys, "verify", "--keys", str(published))
    assert code == 0 and out.startswith("ok: 1 chains, 6 records intact, 6 under a signed checkpoint; 1 tenants registered,")
    assert f"note: checkpoint keys: {published}" in err
    stranger = tmp_path / "stranger.json"
    stranger.write_text(json.dumps(key_document(None, KeyRing.from_private_key(Ed25519PrivateKey.generate()).public)))
    code, out, _ = run(capsys, "verify", "--keys", str(stranger))
    assert code == 1 and out.startswith("broken: checkpoint log not trusted:") and "not in the key set" in out
    truncate(dsn, "acme", keep=4)
    code, out, _ = run(capsys, "verify")
    lines = out.splitlines()
    assert code == 1 and len(lines) == 2
    assert lines[0].startswith(f"broken link: tenant acme, seq 6, decision_id {records[5].decision_id}: records missing")
    assert lines[1].startswith(f"since: records after seq 3 cannot be trusted; the newest signed checkpoint the log still"
                               f" matches names seq 3 (decision_id {records[2].decision_id}, signed ")
    code, out, _ = run(capsys, "verify", "--chain-only")
    assert code == 0  # the hash chain alone does not see it


def test_checkpoint_write_registers_chains_from_before_checkpoints(capsys, dsn):
    store = open_decision_log(dsn)
    store.append(event("acme", 0))
    store.append(event("acme", 1))
    store.close()
    code, out, _ = run(capsys, "verify")
    assert code == 1 and "not in the signed tenant registry" in out
    code, out, _ = run(capsys, "checkpoint", "write")
    assert code == 0 and out == f"signed a checkpoint of 1 chains to {Path(dsn).with_name('decisions.checkpoints.jsonl')};" \
                                " registered 1: acme\n"
    code, out, _ = run(capsys, "verify")
    assert code == 0 and ", 2 under a signed checkpoint; 1 tenants registered, 2 signed statements" in out


def test_checkpoint_write_refuses_to_vouch_for_a_broken_chain(capsys, dsn):
    log = gateway_log()
    records = [log.append(event(i=i)) for i in range(3)]
    log.close()
    raw_sql(dsn, ("UPDATE decision_records SET doc = REPLACE(doc, 'allowed by policy', 'never happened')"
                  " WHERE decision_id = ?", (records[1].decision_id,)))
    lines_before = Path(dsn).with_name("decisions.checkpoints.jsonl").read_text().splitlines()
    code, out, err = run(capsys, "checkpoint", "write")
    assert code == 1 and "record content does not match its hash" in out and "refused" in err
    assert Path(dsn).with_name("decisions.checkpoints.jsonl").read_text().splitlines() == lines_before


def test_checkpoints_of_another_log_are_refused(capsys, dsn, tmp_path, monkeypatch):
    log = gateway_log()
    log.append(event())
    log.close()
    shared = Path(dsn).with_name("decisions.checkpoints.jsonl")
    replaced = tmp_path / "replaced.sqlite"
    monkeypatch.setenv("TOOLGATE_AUDIT_DSN", str(replaced))
    monkeypatch.setenv("TOOLGATE_CHECKPOINT_FILE", str(shared))
    log = gateway_log()  # a new, empty decision log writing to the same checkpoint file
    log.append(event())
    log.close()
    code, out, _ = run(capsys, "verify")
    assert code == 1 and "statements of another decision log" in out and "the log was replaced" in out


FORGED_ROW = "allowed by policy\n2026-01-01T00:00:00.000000Z  01FORGEDFORGEDFORGEDFORGED  decide  acme  admin  allow"
HOSTILE = (FORGED_ROW, "\x1b[2J\x1b[31mscreen cleared", "bidi \u202eevil\u202c", "c1 \x9b31m", "line\u2028sep", "back\\slash")


def _unsafe(text: str) -> list[str]:
    return [c for c in text if unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp"} and c != "\n"]


def test_caller_text_is_escaped_in_every_human_readable_output(capsys, dsn):
    log = gateway_log()
    log.append(event("acme", 0, reasons=HOSTILE))
    log.append(event("evil\ntenant\x1b[0m", 1, reasons=("ok",)))
    log.close()
    code, out, _ = run(capsys, "query", "--tenant", "acme")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2 and not _unsafe(out)  # the header and one record: no forged row
    assert "allowed by policy\\x0a2026-01-01T00:00:00.000000Z  01FORGED" in lines[1]
    assert "\\x1b[2J\\x1b[31mscreen cleared" in lines[1] and "\\u202eevil\\u202c" in lines[1]
    assert "\\x9b31m" in lines[1] and "line\\u2028sep" in lines[1] and "back\\\\slash" in lines[1]
    code, out, _ = run(capsys, "query")
    assert code == 0 and len(out.splitlines()) == 3 and "evil\\x0atenan…" in out  # escaped, then fitted to its column
    code, out, _ = run(capsys, "query", "--tenant", "acme", "--format", "jsonl")
    assert code == 0 and not _unsafe(out) and len(out.splitlines()) == 1
    assert tuple(json.loads(out)["reasons"]) == HOSTILE  # escaped for the terminal, the same JSON value
    raw_sql(dsn, ("DELETE FROM decision_records WHERE tenant = ?", ("evil\ntenant\x1b[0m",)))
    code, out, _ = run(capsys, "verify")
    assert code == 1 and len(out.splitlines()) == 2 and not _unsafe(out)
    assert out.startswith("broken link: tenant evil\\x0atenant\\x1b[0m, seq 1")
