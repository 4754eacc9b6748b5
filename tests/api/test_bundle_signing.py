"""Signed bundles in OPA's ``.signatures.json`` format: interoperable with the real ``opa``
both ways (``toolgate policy build --signing-key`` bundles run under ``opa run
--verification-key``; ``opa build --signing-key`` bundles pass ``toolgate policy verify`` and the
embedded engine), and refused when unsigned, tampered with, signed by another key or scope,
whenever a verification key is configured."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import tarfile

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from app.policy.bundle import build_tarball, read_directory, read_tarball, with_manifest
from app.policy.signing import BundleSignatureError, BundleVerifier, file_hash, sign
from tests.conftest import POLICY_DIR, PROJECT_ROOT
from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error
from tests.support.opa_process import OpaProcess, opa_path

READ = decide_body("readFile", {"path": "/srv/reports/q1.csv"})
#: Data that exercises OPA's canonical JSON: key order, non-ASCII keys, U+2028, number literals.
TRICKY_DATA = {"z": 1, "a": {"é": "line\u2028sep", "b": [1.50, 1e3, -0, 12345678901234567890]}, "<&>": "html"}


def _pem(private, *, public: bool) -> str:
    if public:
        return private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """PEM files of an RSA and an EC key pair, and of a second RSA key (the wrong one)."""
    folder = tmp_path_factory.mktemp("keys")
    out = {}
    for name, private in (("rsa", rsa.generate_private_key(65537, 2048)), ("ec", ec.generate_private_key(ec.SECP256R1())),
                          ("other", rsa.generate_private_key(65537, 2048))):
        (folder / f"{name}.pem").write_text(_pem(private, public=False))
        (folder / f"{name}.pub.pem").write_text(_pem(private, public=True))
        out[name] = (folder / f"{name}.pem", folder / f"{name}.pub.pem")
    return out


@pytest.fixture
def policies(tmp_path):
    copy = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, copy)
    (copy / "extra").mkdir()
    raw = json.dumps(TRICKY_DATA, ensure_ascii=False).replace("1.5,", "1.50,").replace("1000.0", "1e3")
    (copy / "extra" / "data.json").write_text(raw, encoding="utf-8")
    return copy


def _toolgate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=120, check=False)


def test_opa_runs_a_bundle_signed_by_toolgate(keys, policies, tmp_path, make_app):
    private, public = keys["rsa"]
    bundle = tmp_path / "signed.tar.gz"
    built = _toolgate("policy", "build", str(policies), "-o", str(bundle), "--signing-key", str(private))
    assert built.returncode == 0, built.stderr
    server = OpaProcess(tmp_path / "opa", bundle=bundle, extra_args=(f"--verification-key={public}",)).start()
    try:
        resp = make_app(engine="opa", opa_url=server.url).test_client().post(
            "/v1/decide", json=READ, headers=auth(roles=["support_agent"]))
        assert resp.get_json()["decision"] == "allow"
        assert resp.get_json()["policy_revision"] == read_directory(policies).revision
    finally:
        server.stop()


@pytest.mark.parametrize("alg,key", [("RS256", "rsa"), ("ES256", "ec")])
def test_toolgate_verifies_a_bundle_signed_by_opa(keys, policies, tmp_path, alg, key):
    private, public = keys[key]
    bundle = tmp_path / "opa-signed.tar.gz"
    done = subprocess.run(
        [str(opa_path()), "build", "--bundle", ".", "--signing-key", str(private), "--signing-alg", alg, "-o", str(bundle)],
        cwd=policies, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    verified = _toolgate("policy", "verify", str(bundle), "--verification-key", str(public), "--verification-alg", alg)
    assert verified.returncode == 0, verified.stderr
    assert "signature verified" in verified.stdout
    verifier = BundleVerifier(public.read_text(), algorithm=alg)
    verifier.verify(read_tarball(bundle.read_bytes(), source="opa"))


@pytest.mark.parametrize("curve_or_kind,alg", [("ed25519", "EdDSA"), ("p384", "ES384"), ("rsa", "RS256")])
def test_policy_build_signs_with_the_algorithm_of_the_key(keys, policies, tmp_path, curve_or_kind, alg):
    """The signing-key recipe of docs/opa.md for each kind of key: no --signing-alg needed."""
    private = {"ed25519": ed25519.Ed25519PrivateKey.generate(), "p384": ec.generate_private_key(ec.SECP384R1()),
               "rsa": rsa.generate_private_key(65537, 2048)}[curve_or_kind]
    (tmp_path / "key.pem").write_text(_pem(private, public=False))
    (tmp_path / "key.pub.pem").write_text(_pem(private, public=True))
    bundle = tmp_path / "signed.tar.gz"
    built = _toolgate("policy", "build", str(policies), "-o", str(bundle), "--signing-key", str(tmp_path / "key.pem"))
    assert built.returncode == 0, built.stderr
    verified = _toolgate("policy", "verify", str(bundle), "--verification-key", str(tmp_path / "key.pub.pem"),
                         "--verification-alg", alg)
    assert verified.returncode == 0, verified.stderr


def test_a_key_that_does_not_fit_the_algorithm_names_the_flag(policies, tmp_path):
    (tmp_path / "ed.pem").write_text(_pem(ed25519.Ed25519PrivateKey.generate(), public=False))
    out = tmp_path / "signed.tar.gz"
    built = _toolgate("policy", "build", str(policies), "-o", str(out), "--signing-key", str(tmp_path / "ed.pem"),
                      "--signing-alg", "RS256")
    assert built.returncode != 0
    assert "cannot sign with this key and RS256" in built.stderr
    assert "this key signs with EdDSA: pass --signing-alg EdDSA or leave it out" in built.stderr
    (tmp_path / "secret.txt").write_text("not a PEM key")
    built = _toolgate("policy", "build", str(policies), "-o", str(out), "--signing-key", str(tmp_path / "secret.txt"))
    assert built.returncode != 0 and "pass --signing-alg (HS256 for a shared secret)" in built.stderr


def test_opa_refuses_what_toolgate_refuses(keys, policies, tmp_path):
    """An unsigned bundle under ``--verification-key``: both refuse it."""
    _, public = keys["rsa"]
    bundle = tmp_path / "unsigned.tar.gz"
    bundle.write_bytes(build_tarball(with_manifest(read_directory(policies))))
    server = OpaProcess(tmp_path / "opa", bundle=bundle, extra_args=(f"--verification-key={public}",))
    with pytest.raises(RuntimeError, match=r"missing \.signatures\.json"):
        server.start(timeout_s=15)
    with pytest.raises(BundleSignatureError, match="not signed"):
        BundleVerifier(public.read_text()).verify(read_tarball(bundle.read_bytes(), source="x"))


def _signed(policies, private, **kw):
    bundle = with_manifest(read_directory(policies))
    return bundle, sign(bundle, str(private), **kw)


def _retar(bundle, signatures, change=None):
    files = dict(bundle.files)
    if change:
        files.update(change)
    from app.policy.bundle import PolicyBundle

    return read_tarball(build_tarball(PolicyBundle(files=files, revision=bundle.revision), signatures=signatures), source="t")


@pytest.mark.parametrize("case", ["tampered-rule", "added-file", "removed-file", "wrong-key", "wrong-scope", "two-jwts",
                                  "not-json"])
def test_the_verifier_refuses_bad_signatures(keys, policies, case):
    private, public = keys["rsa"]
    bundle, signatures = _signed(policies, private, scope="prod" if case == "wrong-scope" else None)
    verifier = BundleVerifier(public.read_text())
    if case == "tampered-rule":
        candidate = _retar(bundle, signatures, {"tools/files/files.rego": bundle.files["tools/files/files.rego"] + b"\n# changed\n"})
    elif case == "added-file":
        candidate = _retar(bundle, signatures, {"tools/evil.rego": b"package tools.evil\n"})
    elif case == "removed-file":
        files = {k: v for k, v in bundle.files.items() if k != "tools/files/files.rego"}
        from app.policy.bundle import PolicyBundle

        candidate = read_tarball(build_tarball(PolicyBundle(files=files, revision="r"), signatures=signatures), source="t")
    elif case == "wrong-key":
        candidate = _retar(bundle, signatures)
        verifier = BundleVerifier(keys["other"][1].read_text())
    elif case == "two-jwts":
        token = json.loads(signatures)["signatures"][0]
        candidate = _retar(bundle, json.dumps({"signatures": [token, token]}).encode())
    elif case == "not-json":
        candidate = _retar(bundle, b"{")
    else:
        candidate = _retar(bundle, signatures)
    with pytest.raises(BundleSignatureError):
        verifier.verify(candidate)


def test_the_canonical_json_hash_matches_opa(keys, policies, tmp_path):
    """``opa build --signing-key`` over the tricky data: its JWT lists the data.json hash that
    ``file_hash`` computes from the file it wrote."""
    private, _ = keys["rsa"]
    bundle = tmp_path / "b.tar.gz"
    subprocess.run([str(opa_path()), "build", "--bundle", ".", "--signing-key", str(private), "-o", str(bundle)],
                   cwd=policies, check=True, capture_output=True, timeout=120)
    with tarfile.open(fileobj=io.BytesIO(bundle.read_bytes()), mode="r:gz") as tar:
        data = tar.extractfile("/data.json").read()  # type: ignore[union-attr]
        token = json.loads(tar.extractfile("/.signatures.json").read())["signatures"][0]  # type: ignore[union-attr]
    import jwt

    listed = {f["name"]: f["hash"] for f in jwt.decode(token, options={"verify_signature": False})["files"]}
    assert listed["data.json"] == file_hash("data.json", data)
    assert "\u2028" in json.loads(data)["extra"]["a"]["é"]


def test_with_a_verification_key_the_embedded_engine_refuses_unsigned_and_reloads_signed(keys, policies, tmp_path, make_app):
    private, public = keys["rsa"]
    path = tmp_path / "bundle.tar.gz"
    path.write_bytes(build_tarball(with_manifest(read_directory(policies))))  # unsigned
    app = make_app(policy_bundle=str(path), policy_verification_key=str(public), policy_poll_interval_s=0.2)
    client = app.test_client()
    assert_error(client.post("/v1/decide", json=READ, headers=auth(roles=["support_agent"])), 503,
                 "DEPENDENCY_UNAVAILABLE", retryable=True)
    status = app.extensions["toolgate"].engine.status()
    assert status["last_refusal"]["kind"] == "signature" and status["signature_required"] is True

    bundle, signatures = _signed(policies, private)
    path.write_bytes(build_tarball(bundle, signatures=signatures))
    import time

    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and app.extensions["toolgate"].engine.status()["revision"] is None:
        time.sleep(0.05)
    resp = client.post("/v1/decide", json=READ, headers=auth(roles=["support_agent"]))
    assert resp.status_code == 200 and resp.get_json()["decision"] == "allow"

    tampered = _retar(bundle, signatures, {"tools/files/files.rego": b"package tools.files\n\nallow := true\n"})
    path.write_bytes(build_tarball(tampered, signatures=tampered.signatures))
    deadline = time.monotonic() + 3
    engine = app.extensions["toolgate"].engine
    while time.monotonic() < deadline and engine.status()["refusals"] < 2:
        time.sleep(0.05)
    assert engine.status()["last_refusal"]["kind"] == "signature"
    assert engine.status()["revision"] == bundle.revision
    assert client.post("/v1/decide", json=READ, headers=auth(roles=["support_agent"])).get_json()["decision"] == "allow"


def test_production_without_a_verification_key_warns_loudly(tmp_path):
    import os

    env = {**os.environ, "TOOLGATE_ENV": "production", "TOOLGATE_JWT_HS256_SECRET": "p" * 40,
           "TOOLGATE_JWT_ISSUER": "https://idp.example", "TOOLGATE_JWT_AUDIENCE": "toolgate-prod",
           "TOOLGATE_AUDIT_KEY_HASH_SECRET": "q" * 40, "TOOLGATE_APPROVAL_KEYS": "k1:" + "s" * 40,
           "TOOLGATE_AUTHZEN_PDP_URL": "https://toolgate.example"}
    done = subprocess.run([sys.executable, "-m", "app.policy.preflight"], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0
    assert "no TOOLGATE_POLICY_VERIFICATION_KEY" in done.stderr and "!!!!!!!!" in done.stderr
