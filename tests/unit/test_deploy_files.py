"""The compose file and Kubernetes manifest are parsed and checked (no Docker engine runs here,
so this is the validation they get)."""

from __future__ import annotations

import json

import yaml

from tests.conftest import PROJECT_ROOT


def _compose() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())


def test_compose_has_gateway_opa_and_redis():
    services = _compose()["services"]
    assert set(services) == {"gateway", "opa", "redis"}
    for name, service in services.items():
        assert "healthcheck" in service, name
        assert service["healthcheck"]["test"], name


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


def test_opa_runs_v1_server_with_read_only_policies():
    opa = _compose()["services"]["opa"]
    image, tag = opa["image"].split(":")
    assert image == "openpolicyagent/opa"
    assert tag.split(".")[0] == "1"
    assert opa["command"][:2] == ["run", "--server"]
    assert "--addr=0.0.0.0:8181" in opa["command"]
    assert "./policies:/policies:ro" in opa["volumes"]
    config_mount = next(v for v in opa["volumes"] if v.startswith("./deploy/opa-config.yaml"))
    assert config_mount.endswith(":ro")
    config = yaml.safe_load((PROJECT_ROOT / "deploy" / "opa-config.yaml").read_text())
    assert config["decision_logs"]["console"] is True


def test_redis_persists_with_aof():
    redis = _compose()["services"]["redis"]
    assert redis["image"].startswith("redis:")
    assert "--appendonly" in redis["command"]


def test_mounted_paths_exist():
    for path in ("policies", "deploy/opa-config.yaml", "Dockerfile"):
        assert (PROJECT_ROOT / path).exists(), path
    manifest = json.loads((PROJECT_ROOT / "policies" / ".manifest").read_text())
    assert manifest["rego_version"] == 1 and manifest["revision"]


def test_kubernetes_manifest_runs_opa_as_sidecar():
    docs = list(yaml.safe_load_all((PROJECT_ROOT / "deploy" / "kubernetes.yaml").read_text()))
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert set(containers) == {"gateway", "opa"}
    env = {e["name"]: e.get("value") for e in containers["gateway"]["env"]}
    assert env["TOOLGATE_ENGINE"] == "opa" and env["TOOLGATE_OPA_URL"] == "http://127.0.0.1:8181"
    assert containers["opa"]["args"][:2] == ["run", "--server"]
    assert containers["gateway"]["readinessProbe"]["httpGet"]["path"] == "/readyz"
