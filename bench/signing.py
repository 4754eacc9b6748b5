"""``python -m bench.signing``: what signed checkpoints and receipts cost a decide call.

In one process, with the real parts (the embedded engine with the shipped policies, the SQLite
decision log, the Flask app; no network: the read-only allow of ``readFile`` needs no Redis),
three gateways decide the same call:

- ``plain``: no checkpoints, no receipts (the decision log store itself);
- ``checkpoints``: the decision log wrapped in ``CheckpointingLog`` (each append notes its
  record; the clock thread signs and fsyncs once per interval);
- ``checkpoints+receipts``: also an Ed25519 receipt in every response.

All three run with the same production settings but for the keys. Rounds alternate between
the three, each leading in turn, so that drift hits them alike; each figure is the median
over rounds of the mean µs per call, and each ratio the median over rounds of that round's
figure over the same round's ``plain`` figure. Also timed alone: signing one receipt, noting
one record (``CheckpointingLog.append`` around a store whose ``append`` returns at once), and
writing one signed statement to the checkpoint file (sign + write + fsync: once per interval
per worker, off the decide path).
Loopback only; never part of the tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bench.stack import PROJECT_ROOT

CONFIGS = ("plain", "checkpoints", "checkpoints+receipts")


def _app(workdir: Path, config: str, sync: str, engine: Any) -> Any:
    """The Flask app of one configuration, sharing the already loaded ``engine``."""
    from app import build_deps, create_app
    from app.receipts.keys import private_key_pem
    from app.settings import Settings

    folder = workdir / config
    folder.mkdir()
    # Production settings for all three (the same verifier, logging and defaults); production
    # writes checkpoints only with a configured key, so "plain" has none.
    values: dict[str, Any] = {
        "env": "production",
        "authzen_pdp_url": "https://bench.local",
        "jwt_hs256_secret": "b" * 48,
        "jwt_issuer": "https://bench.local",
        "jwt_audience": "bench",
        "audit_key_hash_secret": "k" * 48,
        "policy_dir": PROJECT_ROOT / "policies",
        "contracts_dir": PROJECT_ROOT / "contracts",
        "audit_dsn": str(folder / "decisions.sqlite"),
        "audit_sqlite_synchronous": sync,
        "log_level": "ERROR",
    }
    for kind in ("checkpoint", "receipt"):
        if kind in config:
            (folder / f"{kind}.pem").write_bytes(private_key_pem(Ed25519PrivateKey.generate()))
            values[f"{kind}_key_files"] = [str(folder / f"{kind}.pem")]
    settings = Settings(**values)
    return create_app(settings, build_deps(settings, engine=engine))


def _token(app: Any) -> str:
    import jwt

    settings = app.extensions["toolgate"].settings
    now = int(time.time())
    claims = {"sub": "bench-agent", "tenant": "acme", "roles": ["support_agent"], "iss": settings.jwt_issuer,
              "aud": settings.jwt_audience, "iat": now, "exp": now + 3600}
    return jwt.encode(claims, settings.hs256_secret, algorithm="HS256")


def _caller(app: Any) -> Callable[[], None]:
    client = app.test_client()
    headers = {"Authorization": f"Bearer {_token(app)}"}
    body = {"tool": "readFile", "input": {"path": "/srv/reports/q1.csv"}}

    def call() -> None:
        response = client.post("/v1/decide", json=body, headers=headers)
        assert response.status_code == 200, response.get_json()

    return call


def _mean_us(fn: Callable[[], Any], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def decide_costs(workdir: Path, *, rounds: int, calls: int, sync: str) -> dict[str, list[float]]:
    """The mean µs of one decide call in each of ``rounds`` rounds, per configuration."""
    from app.engine import build_engine
    from app.settings import Settings

    engine_settings: dict[str, Any] = {"policy_dir": PROJECT_ROOT / "policies"}
    engine = build_engine(Settings(**engine_settings))
    callers = {config: _caller(_app(workdir, config, sync, engine)) for config in CONFIGS}
    for call in callers.values():  # warm up: engine per thread, schema, connections, first registration
        for _ in range(50):
            call()
    samples: dict[str, list[float]] = {config: [] for config in CONFIGS}
    for number in range(rounds):
        order = CONFIGS[number % 3 :] + CONFIGS[: number % 3]  # each configuration leads in turn
        for config in order:
            samples[config].append(_mean_us(callers[config], calls))
    return samples


def part_costs(workdir: Path, *, n: int) -> dict[str, float]:
    """µs of the parts alone: a receipt, noting a record, a signed statement to the file."""
    from app.audit.checkpoints import CheckpointingLog, CheckpointWriter
    from app.audit.records import AuditEvent, AuditRecord, ChainHead
    from app.audit.sinks import FileSink
    from app.audit.stores import open_decision_log
    from app.receipts.claims import ReceiptClaims
    from app.receipts.keys import KeyRing
    from app.receipts.signer import ReceiptSigner

    ring = KeyRing.from_private_key(Ed25519PrivateKey.generate())
    signer = ReceiptSigner(ring)
    claims = ReceiptClaims(decision_id="01M8RQ887590JZBDQCKCWANFH0", time="2026-12-01T11:53:43.975091Z", iat=1796125000,
                           tenant="acme", subject="bench-agent", tool="readFile", version="1", input_fingerprint="ab" * 32,
                           shown_input_fingerprint="ab" * 32, reasons=["allowed by policy"],
                           decision="allow", policy_revision="sha256:1b0ee34a0b82fad6", grant_id=None)
    receipt_us = _mean_us(lambda: signer.sign(claims), n)

    store = open_decision_log(str(workdir / "parts.sqlite"), sqlite_synchronous="NORMAL")
    store.append(AuditEvent(event="decide", tenant="acme", request_id="r", decision="allow"))
    event = AuditEvent(event="decide", tenant="acme", request_id="r", decision="allow")
    record = store.append(event)  # seq 2: noting it writes nothing (only a chain's first record is registered at once)
    sink = FileSink(workdir / "parts.checkpoints.jsonl")

    class _Appended:
        """A store whose append returns a record at once: what is left is the wrapper's own work."""

        def append(self, _event: AuditEvent) -> AuditRecord:
            return record

        def log_id(self) -> str:
            return store.log_id()

    log = CheckpointingLog(_Appended(), CheckpointWriter(ring, [sink]), interval_s=86_400)  # type: ignore[arg-type]
    bare = _Appended()
    note_us = statistics.median(_mean_us(lambda: log.append(event), n) - _mean_us(lambda: bare.append(event), n)
                                for _ in range(5))
    heads = [ChainHead("acme", 1, "ab" * 32, "01M8RQ887590JZBDQCKCWANFH0")]
    statement_us = _mean_us(lambda: log.writer.write("checkpoint", store.log_id(), heads), 200)
    store.close()
    return {"receipt_sign_us": receipt_us, "note_record_us": note_us, "statement_write_us": statement_us}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.signing", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (default 7)")
    parser.add_argument("--calls", type=int, default=400, help="decide calls per configuration and round (default 400)")
    parser.add_argument("--audit-synchronous", choices=("FULL", "NORMAL"), default="FULL",
                        help="SQLite durability of the decision log (default FULL, the shipped default)")
    parser.add_argument("--out", type=Path, help="write the results as JSON to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="toolgate-bench-signing-") as tmp:
        workdir = Path(tmp)
        samples = decide_costs(workdir, rounds=args.rounds, calls=args.calls, sync=args.audit_synchronous)
        parts = part_costs(workdir, n=5000)
    decide = {config: statistics.median(values) for config, values in samples.items()}
    # The ratio of each round to the plain figure of the same round, then the median: what
    # drift of the shared machine does to one round it does to all three configurations.
    paired = {config: statistics.median(v / p for v, p in zip(values, samples["plain"], strict=True))
              for config, values in samples.items()}
    results = {
        "decide_us": decide,
        "ratio_to_plain": paired,
        "samples_us": samples,
        **parts,
        "rounds": args.rounds, "calls": args.calls, "audit_synchronous": args.audit_synchronous,
    }
    print(f"{'configuration':<24}{'µs/decide':>12}{'ratio':>8}")
    for config in CONFIGS:
        print(f"{config:<24}{decide[config]:>12.1f}{results['ratio_to_plain'][config]:>8.3f}")
    print(f"receipt signing alone          {parts['receipt_sign_us']:>8.1f} µs")
    print(f"noting a record (per append)   {parts['note_record_us']:>8.1f} µs")
    print(f"one signed statement (fsync'd) {parts['statement_write_us']:>8.1f} µs, once per interval per worker")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
