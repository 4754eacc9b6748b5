"""One assertion for every structured error a test expects (DESIGN §7).

    error = assert_error(resp, 422, "VALIDATION_ERROR", retryable=False, path="/input/path")
    error = assert_error(resp, 503, "DEPENDENCY_UNAVAILABLE", retryable=True)

``resp`` is a Flask test response or a ``requests`` response. The assertion checks, beyond the
HTTP status:

- the body is ``{"ok": false, "error": {"code", "message", "retryable", ...}, "request_id"}``
  with the ``X-Request-Id`` header equal to ``request_id``, a non-empty message and no stack
  trace anywhere in the body;
- ``error.code`` and ``error.retryable`` are the given ones;
- problems: when the error carries ``details.problems`` (a list of ``{path, message}``), the
  test must name ``path``, the path that one of the problems has (a JSON Pointer into the body,
  e.g. ``/input/path``, or ``/headers/Idempotency-Key``; a query parameter's name); a list of
  paths: the problems' paths are exactly those, in order. A ``path`` for an error without
  problems fails;
- ``Retry-After``: a retryable error carries the header, equal to ``retry_after_seconds`` of
  the body; a non-retryable one carries neither;
- ``UNAUTHENTICATED`` carries ``WWW-Authenticate: Bearer ...``.

Returns the ``error`` member for further checks (``details``, message text).
"""

from __future__ import annotations

from typing import Any

ERROR_KEYS = {"code", "message", "retryable", "details", "retry_after_seconds"}


def _json(resp: Any) -> Any:
    return resp.get_json() if hasattr(resp, "get_json") else resp.json()


def _text(resp: Any) -> str:
    return resp.get_data(as_text=True) if hasattr(resp, "get_data") else resp.text


def assert_error(
    resp: Any, status: int, code: str, *, retryable: bool, path: str | list[str] | None = None
) -> dict[str, Any]:
    """Assert that ``resp`` is the structured error ``code`` (see the module docstring)."""
    body = _json(resp)
    assert resp.status_code == status, (resp.status_code, body)
    assert isinstance(body, dict) and body.get("ok") is False, body
    assert set(body) == {"ok", "error", "request_id"}, body
    assert body["request_id"] and resp.headers.get("X-Request-Id") == body["request_id"], body
    error = body["error"]
    assert set(error) <= ERROR_KEYS and {"code", "message", "retryable"} <= set(error), error
    assert (error["code"], error["retryable"]) == (code, retryable), error
    assert isinstance(error["message"], str) and error["message"], error
    assert "Traceback" not in _text(resp), "a stack trace reached the caller"

    problems = (error.get("details") or {}).get("problems") if isinstance(error.get("details"), dict) else None
    if problems is not None:
        paths = [problem["path"] for problem in problems]
        assert path is not None, f"this error has problems at {paths}: name the expected path"
        if isinstance(path, list):
            assert paths == path, error
        else:
            assert path in paths, error
    else:
        assert path is None, f"expected a problem at {path}, the error has no problems: {error}"

    if retryable:
        assert "retry_after_seconds" in error, error
        assert resp.headers.get("Retry-After") == str(error["retry_after_seconds"]), (dict(resp.headers), error)
    else:
        assert "retry_after_seconds" not in error and "Retry-After" not in resp.headers, (dict(resp.headers), error)

    if code == "UNAUTHENTICATED":
        assert resp.headers.get("WWW-Authenticate", "").startswith("Bearer"), dict(resp.headers)
    return error
