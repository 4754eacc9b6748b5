"""The compose file and Kubernetes manifest are parsed and checked (no Docker engine runs here,
so this is the validation they get)."""

from __future__ import annotations

import json
import time

import yaml

from tests.conftest import PROJECT_ROOT


def _compose() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())


def test_compose_has_gateway_proxy_opa_bundles_and_redis():
    services = _compose()["services"]
    assert set(services) == {"gateway", "proxy", "opa", "redis", "bundles"}
    for name in ("gateway", "opa", "redis"):
        assert services[name]["healthcheck"]["test"], name
    assert services["bundles"]["volumes"] == ["./var/bundles:/usr/share/nginx/html/bundles:ro"]


def test_gateway_points_at_the_opa_service_in_production():
    gateway = _compose()["services"]["gateway"]
    env = gateway["environment"]
    assert env["TOOLGATE_ENGINE"] == "opa"
    assert env["TOOLGATE_OPA_URL"] == "http://opa:8181"
    assert env["TOOLGATE_ENV"] == "production"
    assert env["TOOLGATE_REDIS_URL"].startswith("redis://redis:")
    assert gateway["ports"] == ["8080:8080"]
    assert gateway["build"] == "."
    assert set(gateway["depends_on"]) == {"opa", "redis"}


def test_opa_runs_the_pinned_version_polling_a_signed_bundle():
    from app.policy.toolchain import pinned_versions

    opa = _compose()["services"]["opa"]
    image, tag = opa["image"].split(":")
    assert image == "openpolicyagent/opa"
    assert tag == pinned_versions()["OPA_VERSION"].lstrip("v") + "-static"
    assert opa["command"][:2] == ["run", "--server"]
    assert "--addr=0.0.0.0:8181" in opa["command"] and "--bundle" not in opa["command"]
    config_mount = next(v for v in opa["volumes"] if v.startswith("./deploy/opa-config.yaml"))
    assert config_mount.endswith(":ro")
    assert opa["environment"]["TOOLGATE_BUNDLE_SERVICE_URL"] == "http://bundles"
    config = yaml.safe_load((PROJECT_ROOT / "deploy" / "opa-config.yaml").read_text())
    assert config["decision_logs"]["console"] is True and config["status"]["console"] is True
    bundle = config["bundles"]["toolgate"]
    assert bundle["service"] in config["services"]
    assert bundle["signing"]["keyid"] in config["keys"]  # a signing block: signatures required
    assert bundle["polling"]["min_delay_seconds"] <= bundle["polling"]["max_delay_seconds"]


def test_redis_persists_with_aof():
    redis = _compose()["services"]["redis"]
    assert redis["image"].startswith("redis:")
    assert "--appendonly" in redis["command"]


def test_mounted_paths_exist():
    for path in ("deploy/opa-config.yaml", "Dockerfile"):
        assert (PROJECT_ROOT / path).exists(), path
    manifest = json.loads((PROJECT_ROOT / "policies" / ".manifest").read_text())
    assert manifest["rego_version"] == 1 and manifest["revision"]


def test_kubernetes_manifest_runs_opa_as_sidecar():
    docs = list(yaml.safe_load_all((PROJECT_ROOT / "deploy" / "kubernetes.yaml").read_text()))
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert set(containers) == {"gateway", "opa", "proxy"}
    env = {e["name"]: e.get("value") for e in containers["gateway"]["env"]}
    assert env["TOOLGATE_ENGINE"] == "opa" and env["TOOLGATE_OPA_URL"] == "http://127.0.0.1:8181"
    assert containers["opa"]["args"][:2] == ["run", "--server"]
    assert containers["opa"]["readinessProbe"]["httpGet"]["path"] == "/health?bundles"
    assert containers["opa"]["image"] == _compose()["services"]["opa"]["image"]


#: The settings deploy/nginx.conf is rendered for: the pod's (or compose's shared network
#: namespace's) public port in front of gunicorn on loopback, state in the container's /tmp.
DEPLOYED_PROXY = {"proxy_listen": "0.0.0.0:8080", "bind": "127.0.0.1:8081"}


def test_the_deployed_proxy_config_is_the_rendered_one():
    """deploy/nginx.conf is what `toolgate proxy config --state-dir /tmp --log-to-stderr`
    prints for the deployment's settings (regenerate it with TOOLGATE_PROXY_LISTEN=0.0.0.0:8080
    TOOLGATE_BIND=127.0.0.1:8081 and that command)."""
    from pathlib import Path

    from app.proxy.config import ProxyPaths, render
    from app.settings import Settings

    expected = render(Settings(**DEPLOYED_PROXY), ProxyPaths(Path("/tmp"), log_to_stderr=True))
    assert (PROJECT_ROOT / "deploy" / "nginx.conf").read_text() == expected


def test_the_deployed_proxy_config_is_valid_nginx(tmp_path):
    """``nginx -t`` on deploy/nginx.conf with its /tmp paths moved under a test folder."""
    import shutil
    import subprocess

    from tests.support.servers import free_port

    text = (PROJECT_ROOT / "deploy" / "nginx.conf").read_text().replace("/tmp/", f"{tmp_path}/")
    text = text.replace("listen 0.0.0.0:8080", f"listen 127.0.0.1:{free_port()}")
    conf = tmp_path / "nginx.conf"
    conf.write_text(text)
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    result = subprocess.run([nginx, "-t", "-c", str(conf), "-p", str(tmp_path), "-e", "stderr"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def test_only_the_proxy_is_exposed():
    services = _compose()["services"]
    assert services["gateway"]["command"] == ["toolgate", "serve", "--bind", "127.0.0.1:8081"]
    proxy = services["proxy"]
    assert proxy["network_mode"] == "service:gateway"
    assert "./deploy/nginx.conf:/etc/toolgate/nginx.conf:ro" in proxy["volumes"]
    docs = list(yaml.safe_load_all((PROJECT_ROOT / "deploy" / "kubernetes.yaml").read_text()))
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    assert containers["gateway"]["args"] == ["toolgate", "serve", "--bind", "127.0.0.1:8081"]
    assert "ports" not in containers["gateway"]
    assert containers["proxy"]["ports"] == [{"name": "http", "containerPort": 8080}]
    assert containers["proxy"]["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    service = next(d for d in docs if d["kind"] == "Service")
    assert service["spec"]["ports"][0]["targetPort"] == "http"


def test_the_real_opa_runs_the_deploy_config(tmp_path):
    """deploy/opa-config.yaml under the pinned ``opa``: it polls a signed bundle from a bundle
    service (the development one, signing with a fresh key) and activates it; the same config
    with another public key refuses the bundle."""
    import os
    import threading

    import requests
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from app.policy.bundle import read_directory
    from app.policy.bundle_server import BundleCache, make_server
    from app.policy.signing import sign
    from tests.conftest import POLICY_DIR
    from tests.support.opa_process import OpaProcess
    from tests.support.servers import free_port

    def pem_pair():
        key = rsa.generate_private_key(65537, 2048)
        private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()).decode()
        public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo).decode()
        return private, public

    private, public = pem_pair()
    cache = BundleCache(POLICY_DIR, sign=lambda b: sign(b, private, key_id="toolgate"))
    server = make_server(cache, "toolgate", "127.0.0.1", free_port())
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    config = PROJECT_ROOT / "deploy" / "opa-config.yaml"
    env = {"TOOLGATE_BUNDLE_SERVICE_URL": f"http://127.0.0.1:{server.server_address[1]}"}
    saved = {k: os.environ.get(k) for k in (*env, "TOOLGATE_BUNDLE_PUBLIC_KEY")}
    try:
        os.environ.update(env, TOOLGATE_BUNDLE_PUBLIC_KEY=public.replace("\n", "\\n"))
        opa = OpaProcess(tmp_path / "ok", extra_args=(f"--config-file={config}",)).start(timeout_s=30)
        try:
            answer = requests.post(opa.url + "/v1/data/toolgate/decision?provenance=true", json={"input": {}}, timeout=5)
            assert answer.json()["provenance"]["bundles"]["toolgate"]["revision"] == read_directory(POLICY_DIR).revision
        finally:
            opa.stop()
        os.environ["TOOLGATE_BUNDLE_PUBLIC_KEY"] = pem_pair()[1].replace("\n", "\\n")
        refused = OpaProcess(tmp_path / "refused", extra_args=(f"--config-file={config}",)).start(wait_ready=False)
        try:
            time.sleep(3)
            assert requests.get(refused.url + "/health?bundles", timeout=2).status_code != 200
            status = requests.get(refused.url + "/v1/status", timeout=2).json()["result"]["bundles"]["toolgate"]
            assert "verification" in json.dumps(status) or status.get("code") == "bundle_error"
        finally:
            refused.stop()
    finally:
        server.shutdown()
        server.server_close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_the_proxy_waits_longer_than_the_longest_approval_long_poll():
    """A held ``GET /v1/approvals/<id>?wait=`` must answer, not time out in nginx as a 503."""
    from pathlib import Path

    from app.proxy.config import ProxyPaths, render
    from app.settings import Settings

    for max_wait in (0, 30, 120):
        text = render(Settings(approval_max_wait_s=max_wait), ProxyPaths(Path("/tmp")))
        [line] = [line for line in text.splitlines() if "proxy_read_timeout" in line]
        assert int(line.split()[1].rstrip("s;")) > max_wait + 10


def test_the_production_stacks_sign_checkpoints_and_receipts():
    """Without the keys a production gateway writes no checkpoints and gives no receipts."""
    gateway = _compose()["services"]["gateway"]
    env = gateway["environment"]
    secrets = _compose()["secrets"]
    assert env["TOOLGATE_CHECKPOINT_KEY_FILES"] == "/run/secrets/checkpoint-key" and "checkpoint-key" in gateway["secrets"]
    assert env["TOOLGATE_RECEIPT_KEY_FILES"] == "/run/secrets/receipt-key" and "receipt-key" in gateway["secrets"]
    assert set(secrets) == {"checkpoint-key", "receipt-key"}
    checkpoint_volume = env["TOOLGATE_CHECKPOINT_FILE"].rsplit("/", 1)[0]
    assert any(v.endswith(":" + checkpoint_volume) for v in gateway["volumes"])  # not the database's volume
    assert not env["TOOLGATE_CHECKPOINT_FILE"].startswith(env["TOOLGATE_AUDIT_DSN"].rsplit("/", 1)[0])
    docs = list(yaml.safe_load_all((PROJECT_ROOT / "deploy" / "kubernetes.yaml").read_text()))
    pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    [container] = [c for c in pod["containers"] if c["name"] == "gateway"]
    k8s_env = {e["name"]: e.get("value") for e in container["env"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    for name in ("TOOLGATE_CHECKPOINT_KEY_FILES", "TOOLGATE_RECEIPT_KEY_FILES"):
        folder = k8s_env[name].rsplit("/", 1)[0]
        assert volumes[mounts[folder]]["secret"]["secretName"] == "toolgate-signing-keys"
    assert k8s_env["TOOLGATE_CHECKPOINT_REDIS_STREAM"]
