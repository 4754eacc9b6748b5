"""Hostile request bodies and headers: each gets its documented error or decision, never a
500, and nothing in the answer leaks internals."""

from __future__ import annotations

import json

import pytest

from tests.support.calls import auth, decide_body
from tests.support.errors import assert_error


def _support_agent() -> dict[str, str]:
    """A fresh token per request: a token minted at import would expire in a long suite."""
    return auth(roles=["support_agent"])


def _post(client, data, *, content_type="application/json", headers=None):
    return client.post("/v1/decide", data=data, headers={**(headers or _support_agent()), "Content-Type": content_type})


def _invalid(resp, status: int, path: str | list[str] | None = None) -> dict:
    """``resp`` is a VALIDATION_ERROR (not retryable) with the problem at ``path``, and shows no
    source file of the gateway."""
    assert "File \"" not in resp.get_data(as_text=True)
    return assert_error(resp, status, "VALIDATION_ERROR", retryable=False, path=path)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"not json", id="not-json"),
        pytest.param(b"", id="empty"),
        pytest.param(b"\xff\xfe{}", id="not-utf8"),
        pytest.param(b'{"tool": "readFile", "tool": "deleteFile", "input": {}}', id="duplicate-key"),
        pytest.param(b'{"tool": "readFile", "input": {"path": NaN}}', id="nan"),
        pytest.param(b'{"tool": "readFile", "input": {"n": 1e999}}', id="huge-number"),
        pytest.param(b"[" * 5000 + b"]" * 5000, id="deep-array"),
    ],
)
def test_malformed_bodies_are_400(client, raw):
    _invalid(_post(client, raw), 400)


@pytest.mark.parametrize("number", [b"50.000000000000001", b"3.141592653589793238", b"1.00000000000000000001e2"])
def test_a_number_a_float_cannot_keep_is_400_not_rounded(client, number):
    """The policy must judge the number the tool service will read, not its rounded float."""
    raw = b'{"tool": "processPayment", "input": {"amount": ' + number + b', "currency": "EUR", "recipient": "acct_42"}}'
    error = _invalid(_post(client, raw), 400)
    assert error["message"] == "request body has a number with more digits than a 64-bit float keeps"


@pytest.mark.parametrize("number", [b"9007199254740992", b"9007199254740993", b"-9007199254740993", b"1152921504606846976"])
def test_an_integer_beyond_2_53_is_400(client, number):
    """Beyond +-(2^53 - 1) a peer that reads JSON numbers as 64-bit floats (JavaScript) reads
    another integer, or the same one for several texts: refused like an inexact float."""
    raw = b'{"tool": "processPayment", "input": {"amount": ' + number + b', "currency": "EUR", "recipient": "acct_42"}}'
    error = _invalid(_post(client, raw), 400)
    assert error["message"] == "request body has a number with more digits than a 64-bit float keeps"


@pytest.mark.parametrize("number", [b"9007199254740991", b"-9007199254740991", b"0", b"-0"])
def test_integers_within_2_53_are_read(client, number):
    raw = b'{"tool": "readFile", "input": {"path": "/srv/reports/q1.csv", "n": ' + number + b"}}"
    _invalid(_post(client, raw), 422, ["/n"])


@pytest.mark.parametrize("number", [b"0.1", b"1.10", b"1e2", b"0.30000000000000004", b"-0.0"])
def test_numbers_a_float_keeps_are_read(client, number):
    raw = b'{"tool": "readFile", "input": {"path": "/srv/reports/q1.csv", "n": ' + number + b"}}"
    _invalid(_post(client, raw), 422, ["/n"])  # parsed, then refused by the contract: no member n


@pytest.mark.parametrize("raw", [b"[]", b'[{"tool": "readFile"}]', b'"x"', b"42", b"null"])
def test_non_object_json_is_400(client, raw):
    assert _invalid(_post(client, raw), 400)["message"] == "request body must be a JSON object"


def test_one_mebibyte_is_413(client):
    raw = json.dumps(decide_body("readFile", {"path": "a" * (1024 * 1024)})).encode()
    _invalid(_post(client, raw), 413)


def test_input_nested_100_deep_is_422(client):
    nested: dict = {}
    node = nested
    for _ in range(100):
        node["a"] = {}
        node = node["a"]
    _invalid(_post(client, json.dumps(decide_body("someDynamicTool", nested)).encode()), 422, ["/input"])


def test_unknown_envelope_field_is_422(client):
    """pc-13: a body asserting another caller is rejected (the acceptable alternative)."""
    raw = decide_body("readFile", {"path": "/srv/a"}, caller={"sub": "u-root", "roles": ["admin"]})
    error = _invalid(_post(client, json.dumps(raw).encode()), 422, ["/caller"])
    assert error["details"]["problems"] == [{"path": "/caller", "message": "Extra inputs are not permitted"}]


def test_unknown_input_field_is_422(client):
    raw = decide_body("readFile", {"path": "/srv/a", "mode": "rw"})
    _invalid(_post(client, json.dumps(raw).encode()), 422, ["/mode"])


@pytest.mark.parametrize(
    ("tool_input", "paths"),
    [
        ({"path": 42}, ["/path"]),
        ({"path": None}, ["/path"]),
        ({"path": ["a"]}, ["/path"]),
        ({"path": ""}, ["/path"]),  # too short
        ({"path": "a\u0000b"}, ["/path"]),
        ({}, [""]),  # JSON Schema reports a missing property at the object that lacks it
    ],
)
def test_wrong_types_are_422(client, tool_input, paths):
    _invalid(_post(client, json.dumps(decide_body("readFile", tool_input)).encode()), 422, paths)


@pytest.mark.parametrize("tool", ["readFile", "deleteFile"])
def test_a_path_of_more_than_128_segments_is_422_before_the_policy(client, tool):
    """The file policy's work grows with a path's segments (a 4 KB path of 2,000 segments cost
    ~430 ms of policy time, a normal call ~2 ms): the contracts take at most 128 slashes, which
    bounds such a call to under 2x a normal one (``opa bench`` figures in the commit)."""
    if tool == "readFile":
        at_most = "/srv/" + "a/" * 126 + "b.txt"
        assert _post(client, json.dumps(decide_body(tool, {"path": at_most})).encode()).status_code == 200
    deeper = "/srv/" + "a/" * 2000
    _invalid(_post(client, json.dumps(decide_body(tool, {"path": deeper})).encode()), 422, ["/path"])
    _invalid(_post(client, json.dumps(decide_body(tool, {"path": "/" * 4096})).encode()), 422, ["/path"])


@pytest.mark.parametrize("tool", ["__class__", "../x", "", "a" * 300, "x y", "tool\n", 42, None])
def test_bad_tool_names_are_422(client, tool):
    raw = {"tool": tool, "version": "1", "input": {}}
    _invalid(_post(client, json.dumps(raw).encode()), 422, ["/tool"])


def test_input_must_be_an_object(client):
    raw = {"tool": "readFile", "version": "1", "input": ["/etc/passwd"]}
    _invalid(_post(client, json.dumps(raw).encode()), 422, ["/input"])


def test_unregistered_tool_name_is_a_decision_not_an_error(client):
    resp = _post(client, json.dumps(decide_body("constructor", {"x": 1})).encode())
    assert resp.status_code == 200
    assert resp.get_json()["decision"] == "deny"


def test_bad_request_id_is_replaced(client):
    resp = client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a"}),
                       headers={**_support_agent(), "X-Request-Id": "bad id\twith spaces"})
    assert resp.headers["X-Request-Id"] != "bad id\twith spaces"
    good = client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a"}),
                       headers={**_support_agent(), "X-Request-Id": "req-123:abc"})
    assert good.headers["X-Request-Id"] == "req-123:abc"
    assert good.get_json()["request_id"] == "req-123:abc"


def test_unknown_route_and_method_are_structured(client):
    assert_error(client.get("/v1/nothing-here"), 404, "NOT_FOUND", retryable=False)
    resp = client.get("/v1/decide", headers=_support_agent())
    _invalid(resp, 405)
    assert "POST" in resp.headers["Allow"]


def test_uncaught_exception_is_500_without_leak(app, client, monkeypatch):
    deps = app.extensions["toolgate"]

    def explode(*args, **kwargs):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(deps.engine, "evaluate", explode)
    resp = client.post("/v1/decide", json=decide_body("readFile", {"path": "/srv/a"}), headers=_support_agent())
    error = assert_error(resp, 500, "INTERNAL_ERROR", retryable=False)
    assert "secret internal detail" not in resp.get_data(as_text=True)
    assert error["message"] == "internal error"


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(rb'{"tool": "dynX", "input": {"\ud800": 1}}', id="lone-surrogate-key"),
        pytest.param(rb'{"tool": "readFile", "input": {"path": "/a\ud800"}}', id="lone-surrogate-value"),
        pytest.param(rb'{"tool": "readFile", "input": {"path": "/a"}, "context": {"x": "\udc00"}}', id="lone-low-surrogate"),
    ],
)
def test_lone_surrogates_are_400_not_5xx(client, raw):
    """A string RFC 8785 cannot canonicalize is the caller's mistake (400), never a retryable
    503 or a 500; a valid surrogate pair (an emoji) is fine."""
    _invalid(_post(client, raw), 400)
    ok = _post(client, rb'{"tool": "dynX", "input": {"note": "\ud83d\ude00"}}')
    assert ok.status_code == 200


def test_sensitive_paths_apply_to_unknown_versions(client, app):
    """update_password v2 has no contract: the password is still redacted in the response and
    the decision record (every version's sensitive paths apply to the tool name)."""
    body = decide_body("update_password", {"password": "S3cretPW-v2"}, version="2")
    resp = client.post("/v1/decide", json=body, headers=auth("emma", "bank-demo", ["account_holder"]))
    assert resp.status_code == 200
    assert "S3cretPW-v2" not in resp.get_data(as_text=True)
    record = app.extensions["toolgate"].decision_reader.get(resp.headers["X-Decision-Id"], tenant="bank-demo")
    assert record.input == {"password": "[REDACTED]"} and "S3cretPW-v2" not in repr(record)


def test_double_slash_report_is_not_redirected_to_another_key(client):
    resp = client.post("/v1/executions//pay-1/complete", json={"result": {}}, headers=_support_agent())
    assert_error(resp, 404, "NOT_FOUND", retryable=False)
    assert "Location" not in resp.headers


def test_comma_in_idempotency_key_is_refused(client):
    """Repeated header lines arrive joined with commas; such a key is ambiguous."""
    body = decide_body("createTicket", {"title": "t", "description": "d", "clientMutationId": "6f1c2b1e-9a8d-4c3b-8e7f-1a2b3c4d5e6f"})
    resp = client.post("/v1/decide", json=body, headers={**_support_agent(), "Idempotency-Key": "d1,d2"})
    _invalid(resp, 400, ["/headers/Idempotency-Key"])


def test_unauthenticated_calls_carry_no_decision_id(client):
    resp = client.post("/v1/decide", json=decide_body("readFile", {"path": "/a"}), headers={"Authorization": "Bearer x"})
    assert_error(resp, 401, "UNAUTHENTICATED", retryable=False)
    assert "X-Decision-Id" not in resp.headers
