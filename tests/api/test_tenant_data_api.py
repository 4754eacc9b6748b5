"""Tenant data pushed through ``/v1/policy/tenants/<tenant>/data``: a push changes what the
policy decides and the policy revision every decision names, is recorded in the tenant's chain,
is refused whole when it is not valid tenant data, and only operators of the tenant (or of the
platform tenant) may read or push it. Through the real app, embedded engine and SQLite log,
and a real OPA sidecar polling the development bundle service."""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid

import pytest

from app.audit.queries import DecisionQuery
from app.policy.bundle import read_directory
from app.policy.bundle_server import BundleCache, make_server
from tests.conftest import POLICY_DIR
from tests.support.calls import auth, decide_body
from tests.support.opa_process import OpaProcess
from tests.support.servers import free_port

TENANT = "bank-demo"
URL = f"/v1/policy/tenants/{TENANT}/data"
NEW_PAYEE = "FR1420041010050500013M02606"  # a valid IBAN the shipped tenant data does not know


def operator() -> dict[str, str]:
    """The tenant operator's header, minted when used (a token minted at collection time would
    expire before a long parallel run reaches the test)."""
    return auth("ops-1", TENANT, ["operator"])


@pytest.fixture
def policies(tmp_path):
    copy = tmp_path / "policies"
    shutil.copytree(POLICY_DIR, copy)
    return copy


@pytest.fixture
def pushable(make_app, policies, tmp_path):
    return make_app(policy_dir=policies, tenant_data_dir=tmp_path / "tenant-data", policy_poll_interval_s=0.2)


def _transfer(client, recipient):
    body = decide_body("send_money", {"recipient": recipient, "amount": 100, "subject": "Rent", "date": "2022-04-01"})
    headers = {**auth("emma", TENANT, ["account_holder"]), "Idempotency-Key": uuid.uuid4().hex}
    resp = client.post("/v1/decide", json=body, headers=headers)
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def _shipped(policies):
    return json.loads((policies / "tenants" / TENANT / "data.json").read_text())


def test_a_push_makes_a_payee_known_and_changes_the_revision(pushable, policies):
    client = pushable.test_client()
    before = _transfer(client, NEW_PAYEE)
    assert before["decision"] == "user-approval"
    assert before["policy_revision"] == read_directory(policies).revision

    shown = client.get(URL, headers=operator())
    assert shown.status_code == 200
    assert shown.get_json()["source"] == "policy_dir" and shown.get_json()["data"] == _shipped(policies)

    data = _shipped(policies)
    data["counterparties"]["payees"].append(NEW_PAYEE)
    pushed = client.put(URL, json=data, headers=operator())
    assert pushed.status_code == 200, pushed.get_json()
    body = pushed.get_json()
    assert body["previous_version"] is None and body["version"].startswith("sha256:")
    assert body["policy_revision"] != before["policy_revision"]
    assert body["policy_revision"] == read_directory(policies, tenant_data_dir=pushable.extensions["toolgate"]
                                                     .settings.tenant_data_dir).revision

    after = _transfer(client, NEW_PAYEE)
    assert (after["decision"], after["policy_revision"]) == ("allow", body["policy_revision"])
    assert _transfer(client, "CH9300762011623852957")["decision"] == "allow"  # the shipped payees stay

    reread = client.get(URL, headers=operator()).get_json()
    assert reread["source"] == "pushed" and reread["data"] == data and reread["version"] == body["version"]

    reader = pushable.extensions["toolgate"].decision_reader
    [record] = reader.query(DecisionQuery(tenant=TENANT, event="tenant_data_put"), limit=10).records
    assert record.decision_id == body["decision_id"] and record.subject_id == "ops-1"
    assert record.policy_revision == body["policy_revision"] and record.error_code is None
    assert body["version"] in record.reasons[0]
    decided = reader.get(after["decision_id"])
    assert decided.policy_revision == body["policy_revision"]


def test_another_worker_picks_the_push_up_by_polling(pushable, make_app, policies):
    """Two apps over one policy directory and overlay: the one that did not answer the push
    reloads it within its poll interval."""
    other = make_app(policy_dir=policies, tenant_data_dir=pushable.extensions["toolgate"].settings.tenant_data_dir,
                     policy_poll_interval_s=0.2).test_client()
    assert _transfer(other, NEW_PAYEE)["decision"] == "user-approval"
    data = _shipped(policies)
    data["counterparties"]["payees"].append(NEW_PAYEE)
    revision = pushable.test_client().put(URL, json=data, headers=operator()).get_json()["policy_revision"]
    deadline = time.monotonic() + 3
    while (seen := _transfer(other, NEW_PAYEE))["policy_revision"] != revision and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (seen["decision"], seen["policy_revision"]) == ("allow", revision)


@pytest.mark.parametrize(
    ("document", "status", "path"),
    [
        ({"payees": ["X"]}, 422, "/"),
        ({"limits": {"transfer_auto_approve_amount": "a lot"}}, 422, "/limits/transfer_auto_approve_amount"),
        ({"limits": {"transfer_auto_approve_amount": -1}}, 422, "/limits/transfer_auto_approve_amount"),
        ({"counterparties": {"payees": "GB29NWBK60161331926819"}}, 422, "/counterparties/payees"),
        ({"features": {"delete_files": "yes"}}, 422, "/features/delete_files"),
        ({"allowed_domains": [""]}, 422, "/allowed_domains/0"),
        ({"custom": {"payee_aliases": ["a lot"]}}, 422, "/custom/payee_aliases"),  # no family declares it
        ({"custom": {"secret_patterns": {"card": "(?<=a lot)x"}}}, 422, "/custom/secret_patterns/card"),  # not RE2
        ({"custom": {"secret_patterns": ["a lot"]}}, 422, "/custom/secret_patterns"),
        ([1, 2], 400, None),
    ],
)
def test_invalid_tenant_data_is_refused_and_nothing_changes(pushable, policies, document, status, path):
    client = pushable.test_client()
    resp = client.put(URL, json=document, headers=operator())
    assert resp.status_code == status, resp.get_json()
    error = resp.get_json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and error["retryable"] is False
    if path is not None:
        assert [p["path"] for p in error["details"]["problems"]] == [path]
        assert "a lot" not in json.dumps(error)  # problems never quote the values
    assert client.get(URL, headers=operator()).get_json()["source"] == "policy_dir"
    assert _transfer(client, NEW_PAYEE)["policy_revision"] == read_directory(policies).revision


def test_a_custom_member_the_policy_declares_is_pushed(pushable):
    client = pushable.test_client()
    data = {"custom": {"secret_patterns": {"bank_token": r"\bBDT-[0-9]{8}\b"}}}
    assert client.put(URL, json=data, headers=operator()).status_code == 200
    assert client.get(URL, headers=operator()).get_json()["data"] == data


def test_a_document_over_the_size_limit_is_refused(make_app, policies, tmp_path):
    app = make_app(policy_dir=policies, tenant_data_dir=tmp_path / "td", policy_poll_interval_s=0.2,
                   tenant_data_max_bytes=200)
    resp = app.test_client().put(URL, json={"allowed_domains": ["a" * 60 + ".example"] * 4}, headers=operator())
    assert resp.status_code == 413 and resp.get_json()["error"]["code"] == "VALIDATION_ERROR"
    assert not (tmp_path / "td").exists()


@pytest.mark.parametrize(
    ("subject", "status"),
    [
        (None, 401),
        (("emma", TENANT, ["account_holder"]), 403),
        (("ops-2", "acme", ["operator"]), 403),
    ],
)
def test_only_the_tenants_operators_read_and_push(pushable, subject, status):
    client = pushable.test_client()
    headers = auth(*subject) if subject else {}  # minted here: a token minted at collection expires
    assert client.get(URL, headers=headers).status_code == status
    assert client.put(URL, json={"allowed_domains": ["bank.example"]}, headers=headers).status_code == status


def test_an_operator_of_the_platform_tenant_pushes_for_any_tenant(make_app, policies, tmp_path):
    app = make_app(policy_dir=policies, tenant_data_dir=tmp_path / "td", policy_poll_interval_s=0.2,
                   audit_platform_tenant="platform")
    client = app.test_client()
    platform = auth("root-ops", "platform", ["operator"])
    resp = client.put(URL, json={"allowed_domains": ["bank.example"]}, headers=platform)
    assert resp.status_code == 200, resp.get_json()
    assert client.get(URL, headers=platform).get_json()["data"] == {"allowed_domains": ["bank.example"]}
    [record] = app.extensions["toolgate"].decision_reader.query(
        DecisionQuery(tenant=TENANT, event="tenant_data_put"), limit=10
    ).records
    assert record.subject_id == "root-ops" and "of tenant platform" in record.reasons[0]


def test_a_tenant_id_that_cannot_have_data_is_refused(pushable):
    resp = pushable.test_client().get("/v1/policy/tenants/a.b/data", headers=auth("ops", "a.b", ["operator"]))
    assert resp.status_code == 400 and resp.get_json()["error"]["code"] == "VALIDATION_ERROR"


def test_a_tenant_without_data_is_not_found(pushable):
    resp = pushable.test_client().get("/v1/policy/tenants/nobody/data", headers=auth("ops", "nobody", ["operator"]))
    assert resp.status_code == 404 and resp.get_json()["error"]["code"] == "NOT_FOUND"


@pytest.mark.parametrize(
    "overrides",
    [{}, {"policy_poll_interval_s": 0}, {"policy_bundle": "/nonexistent/bundle.tar.gz"}],
    ids=["no-overlay-dir", "no-polling", "bundle-source"],
)
def test_a_push_that_would_not_reach_the_policy_is_refused_and_recorded(make_app, policies, tmp_path, overrides):
    settings = {"policy_dir": policies, "policy_poll_interval_s": 0.2, **overrides}
    if overrides:
        settings["tenant_data_dir"] = tmp_path / "td"
    app = make_app(**settings)
    resp = app.test_client().put(URL, json={"allowed_domains": ["bank.example"]}, headers=operator())
    assert resp.status_code == 409 and resp.get_json()["error"]["code"] == "CONFLICT"
    assert not (tmp_path / "td").exists()
    [record] = app.extensions["toolgate"].decision_reader.query(
        DecisionQuery(tenant=TENANT, event="tenant_data_put"), limit=10
    ).records
    assert record.error_code == "CONFLICT" and "refused" in record.reasons[0]


def test_the_opa_sidecar_polls_the_pushed_data_from_the_bundle_service(make_app, policies, tmp_path):
    """``toolgate policy serve-bundle`` lays the overlay over the directory: OPA, polling it,
    activates the revision the push answered and decides with the pushed payee."""
    overlay = tmp_path / "tenant-data"
    bundles = make_server(BundleCache(policies, tenant_data_dir=overlay), "toolgate", "127.0.0.1", free_port())
    threading.Thread(target=bundles.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    host, port = bundles.server_address[:2]
    config = {
        "services": {"bundles": {"url": f"http://{host}:{port}"}},
        "bundles": {"toolgate": {"service": "bundles", "resource": "/bundles/toolgate.tar.gz",
                                 "polling": {"min_delay_seconds": 1, "max_delay_seconds": 1}}},
    }
    opa = OpaProcess(tmp_path / "opa", config=config).start()
    try:
        client = make_app(engine="opa", opa_url=opa.url, policy_dir=policies, tenant_data_dir=overlay).test_client()
        assert _transfer(client, NEW_PAYEE)["decision"] == "user-approval"
        data = _shipped(policies)
        data["counterparties"]["payees"].append(NEW_PAYEE)
        pushed = client.put(URL, json=data, headers=operator())
        assert pushed.status_code == 200, pushed.get_json()
        revision = pushed.get_json()["policy_revision"]
        deadline = time.monotonic() + 10
        while (seen := _transfer(client, NEW_PAYEE))["policy_revision"] != revision and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (seen["decision"], seen["policy_revision"]) == ("allow", revision)
    finally:
        opa.stop()
        bundles.shutdown()
        bundles.server_close()


def test_if_match_refuses_a_push_over_data_that_changed(pushable):
    """Two operators read the same version; the second push, made on what it read, is refused."""
    client = pushable.test_client()
    read = client.get(URL, headers=operator())
    etag = read.headers["ETag"]
    assert etag == f'"{read.get_json()["version"]}"'
    first = client.put(URL, json={"allowed_domains": ["a.example"]}, headers={**operator(), "If-Match": etag})
    assert first.status_code == 200, first.get_json()
    stale = client.put(URL, json={"allowed_domains": ["b.example"]}, headers={**operator(), "If-Match": etag})
    assert stale.status_code == 409 and stale.get_json()["error"]["code"] == "CONFLICT"
    assert client.get(URL, headers=operator()).get_json()["data"] == {"allowed_domains": ["a.example"]}
    fresh = client.put(URL, json={"allowed_domains": ["b.example"]}, headers={**operator(), "If-Match": first.headers["ETag"]})
    assert fresh.status_code == 200 and fresh.get_json()["previous_version"] == first.get_json()["version"]


def test_a_tenants_pushes_are_rate_limited_and_the_refusal_recorded(make_app, policies, tmp_path):
    """Each push makes every worker recompile the policy: one tenant may push at most
    TOOLGATE_TENANT_DATA_PUSH_RATE, whoever pushes; another tenant's pushes are not counted."""
    app = make_app(policy_dir=policies, tenant_data_dir=tmp_path / "tenant-data", policy_poll_interval_s=0.2,
                   tenant_data_push_rate="2/60s")
    client = app.test_client()
    data = _shipped(policies)
    statuses = [client.put(URL, json=data, headers=auth(f"ops-{n}", TENANT, ["operator"])).status_code for n in range(3)]
    assert statuses == [200, 200, 429]
    refused = client.put(URL, json=data, headers=operator())
    assert refused.get_json()["error"]["details"] == {"rate_limit": "tenant_data.push", "scope": "tenant"}
    assert client.put("/v1/policy/tenants/acme/data", json={}, headers=auth("ops-a", "acme", ["operator"])).status_code == 200
    app.extensions["toolgate"].decision_log.flush()
    records = app.extensions["toolgate"].decision_reader.query(DecisionQuery(tenant=TENANT, event="tenant_data_put"), limit=10).records
    assert sorted(r.error_code or "ok" for r in records) == ["RATE_LIMITED", "RATE_LIMITED", "ok", "ok"]
