"""HTTP to the gateway: one logical call = attempts under ``toolgate_client.retry``.

``Transport.call`` sends the same method, path, body and headers (``Idempotency-Key``
included) on every attempt; only ``Authorization`` (the token provider is asked again, so a
refreshed token is used) and ``X-Request-Id`` (``<id>`` then ``<id>.2``, ``<id>.3``...) change.
It returns the decoded JSON object of a 2xx response, or raises a ``ToolgateClientError``.
Tokens never appear in exceptions, logs or ``repr``.
"""

from __future__ import annotations

import email.utils
import json
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from toolgate_client.errors import (
    ERRORS_BY_CODE,
    ApiError,
    InternalError,
    TransportError,
    UnexpectedResponse,
)
from toolgate_client.retry import RetryEvent, RetryPolicy, run_with_retries

TokenSource = str | Callable[[], str]

#: Exceptions raised while connecting: the request was never sent.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def new_request_id() -> str:
    """A fresh client request id (``tgc-`` + 24 hex characters)."""
    return "tgc-" + secrets.token_hex(12)


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3); None if
    absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_from_response(response: httpx.Response) -> ApiError | UnexpectedResponse:
    """The typed error for a non-2xx ``response``."""
    header_request_id = response.headers.get("X-Request-Id")
    try:
        body = response.json()
        error = body["error"]
        code, message, retryable = error["code"], error["message"], error["retryable"]
        if not (isinstance(code, str) and isinstance(message, str) and isinstance(retryable, bool)):
            raise TypeError("error members of the wrong type")
    except (ValueError, KeyError, TypeError):
        return UnexpectedResponse("response without the gateway's error body", status=response.status_code,
                                  request_id=header_request_id)
    retry_after_s = parse_retry_after(response.headers.get("Retry-After"))
    if retry_after_s is None and isinstance(error.get("retry_after_seconds"), int | float):
        retry_after_s = float(error["retry_after_seconds"])
    cls = ERRORS_BY_CODE.get(code, InternalError)
    request_id = body.get("request_id") if isinstance(body.get("request_id"), str) else header_request_id
    return cls(
        status=response.status_code,
        code=code,
        message=message,
        retryable=retryable,
        request_id=request_id,
        details=error.get("details"),
        retry_after_s=retry_after_s,
    )


class Transport:
    """Sends logical calls to ``base_url`` (e.g. ``http://127.0.0.1:8080``).

    ``token`` is the bearer token or a function returning it (asked once per attempt);
    ``retry`` the default policy; ``http`` an ``httpx.Client`` to use instead of a new one
    (its own timeouts are replaced per attempt); ``on_retry`` is told about every retry.
    """

    def __init__(
        self,
        base_url: str,
        token: TokenSource,
        *,
        retry: RetryPolicy | None = None,
        http: httpx.Client | None = None,
        on_retry: Callable[[RetryEvent], None] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.retry = retry or RetryPolicy()
        self._http = http or httpx.Client(headers={"User-Agent": "toolgate-client-python/0.1"})
        self._owns_http = http is None
        self.on_retry = on_retry

    def __repr__(self) -> str:
        return f"Transport({self.base_url!r})"

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def bearer(self) -> str:
        return self._token() if callable(self._token) else self._token

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        idempotent: bool = True,
        retry: RetryPolicy | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """One logical call; see the module docstring. ``idempotent=False`` limits retries after
        a transport error to requests that were never sent."""
        base_id = request_id or new_request_id()
        content = None if body is None else json.dumps(body, separators=(",", ":"), allow_nan=False).encode()

        def attempt(number: int, timeout_s: float) -> dict[str, Any]:
            sent_headers = {
                **(headers or {}),
                "Authorization": f"Bearer {self.bearer()}",
                "X-Request-Id": base_id if number == 1 else f"{base_id}.{number}",
            }
            if content is not None:
                sent_headers["Content-Type"] = "application/json"
            try:
                response = self._http.request(
                    method, self.base_url + path, content=content, params=params, headers=sent_headers,
                    timeout=httpx.Timeout(timeout_s),
                )
            except _NOT_SENT as exc:
                raise TransportError(f"{method} {path}: {type(exc).__name__}", sent=False) from exc
            except httpx.TransportError as exc:
                raise TransportError(f"{method} {path}: {type(exc).__name__}", sent=True) from exc
            if response.is_success:
                return _json_object(response)
            raise error_from_response(response)

        return run_with_retries(attempt, retry or self.retry, idempotent=idempotent, on_retry=self.on_retry)


def _json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        value = response.json()
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise UnexpectedResponse("success response is not a JSON object", status=response.status_code,
                                 request_id=response.headers.get("X-Request-Id"))
    return value
