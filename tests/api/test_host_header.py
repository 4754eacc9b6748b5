"""A request's ``Host`` header never names where the gateway sends a client: the AuthZEN
metadata without ``TOOLGATE_AUTHZEN_PDP_URL`` and the trailing-slash redirect, through the
HTTP interface."""

from __future__ import annotations

from tests.support.errors import assert_error

METADATA = "/.well-known/authzen-configuration"


def test_a_redirect_to_the_gateway_itself_names_the_path_only(client) -> None:
    for host in ("evil.example", "127.0.0.1:8080"):
        response = client.get("/console?x=1", headers={"Host": host})
        assert response.status_code == 308 and response.headers["Location"] == "/console/?x=1", host


def test_the_authzen_metadata_names_only_an_allowed_host(client, make_app) -> None:
    assert_error(client.get(METADATA, headers={"Host": "evil.example"}), 400, "VALIDATION_ERROR", retryable=False,
                 path="/headers/Host")
    local = client.get(METADATA, headers={"Host": "127.0.0.1:18491"}).get_json()
    assert local["access_evaluation_endpoint"] == "http://127.0.0.1:18491/access/v1/evaluation"
    subdomains = make_app(authzen_allowed_hosts=".example.com").test_client()
    named = subdomains.get(METADATA, base_url="https://pdp.example.com").get_json()
    assert named["policy_decision_point"] == "https://pdp.example.com"
    assert_error(subdomains.get(METADATA, headers={"Host": "localhost"}), 400, "VALIDATION_ERROR", retryable=False,
                 path="/headers/Host")


def test_a_configured_pdp_url_is_named_whatever_the_host(make_app) -> None:
    pinned = make_app(authzen_pdp_url="https://pdp.toolgate.test", authzen_allowed_hosts="").test_client()
    body = pinned.get(METADATA, headers={"Host": "evil.example"}).get_json()
    assert body["access_evaluations_endpoint"] == "https://pdp.toolgate.test/access/v1/evaluations"
