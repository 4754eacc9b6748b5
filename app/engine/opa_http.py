"""The OPA sidecar engine: OPA's REST Data API, ``POST /v1/data/<path>`` with ``{"input": ...}``.

One pooled ``requests.Session`` per worker process (built lazily, after fork), explicit connect
and read timeouts, ``strict-builtin-errors`` on every query, ``provenance`` to learn the bundle
revision, and the ``traceparent`` header forwarded.

Retries are done here and only here (the HTTP adapter does none): at most
``opa_max_attempts`` attempts inside one total deadline (``opa_deadline_ms``), full-jitter
exponential backoff (base ``opa_backoff_base_ms``, cap ``opa_backoff_cap_ms``; AWS Architecture
Blog, "Exponential Backoff and Jitter"), a ``Retry-After`` (delta-seconds or HTTP-date, RFC 9110
§10.2.3) is honoured and never undercut, and a retry that cannot finish before the deadline is
not started. A retry budget (retries at most ``opa_retry_budget_ratio`` of first attempts plus
``opa_retry_budget_floor``, gRPC A6 retry throttling in spirit) stops retry storms during an
outage. Retried: connection errors, timeouts, 429, 502, 503, 504. Not retried: a 500 (an
evaluation error is deterministic) or any other status; those fail closed with
``DependencyUnavailable``. A 200 without ``result`` is an undefined decision: deny.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import threading
import time
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from app import metrics
from app.engine.base import normalize
from app.errors import DependencyUnavailable
from app.models import PolicyDecision
from app.settings import Settings

log = logging.getLogger(__name__)

_RETRYABLE_STATUS = {429, 502, 503, 504}


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (RFC 9110 §10.2.3), or None when absent or
    invalid. Accepts non-negative whole delta-seconds (at most 10 digits) or an HTTP-date;
    never negative."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        # More than 10 digits (over 300 years) is not a delay a server means: ignore it.
        return float(value) if len(value) <= 10 else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class RetryBudget:
    """Token bucket limiting retries to ``ratio`` of requests plus a ``floor`` (thread-safe)."""

    def __init__(self, ratio: float, floor: int) -> None:
        self._ratio = ratio
        self._max = float(floor) if floor else 1.0
        self._tokens = self._max
        self._lock = threading.Lock()

    def record_request(self) -> None:
        with self._lock:
            self._tokens = min(self._max, self._tokens + self._ratio)

    def try_spend(self) -> bool:
        with self._lock:
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False


class _Attempt(Exception):
    """One failed attempt: whether it may be retried and the server-requested delay."""

    def __init__(self, detail: str, *, retryable: bool, retry_after_s: float | None = None) -> None:
        super().__init__(detail)
        self.retryable = retryable
        self.retry_after_s = retry_after_s


class OpaSidecarEngine:
    """``PolicyEngine`` backed by an OPA server's REST Data API."""

    name = "opa"

    def __init__(self, settings: Settings, *, session: requests.Session | None = None) -> None:
        self._s = settings
        self._url = settings.opa_url.rstrip("/") + "/v1/data/" + settings.decision_path
        self._session = session
        self._session_lock = threading.Lock()
        self._budget = RetryBudget(settings.opa_retry_budget_ratio, settings.opa_retry_budget_floor)
        self._revision = "unknown"

    def _http(self) -> requests.Session:
        if self._session is None:
            with self._session_lock:
                if self._session is None:
                    session = requests.Session()
                    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=32, max_retries=0)
                    session.mount("http://", adapter)
                    session.mount("https://", adapter)
                    session.trust_env = False
                    self._session = session
        return self._session

    def _attempt(self, body: dict[str, Any], timeout_s: tuple[float, float], headers: dict[str, str]) -> dict:
        try:
            resp = self._http().post(
                self._url,
                params={"strict-builtin-errors": "true", "provenance": "true"},
                json=body,
                headers=headers,
                timeout=timeout_s,
                allow_redirects=False,
            )
        except requests.Timeout as exc:
            metrics.ENGINE_ERRORS.labels("timeout").inc()
            raise _Attempt(f"timeout: {type(exc).__name__}", retryable=True) from exc
        except requests.ConnectionError as exc:
            metrics.ENGINE_ERRORS.labels("connection").inc()
            raise _Attempt(f"connection error: {type(exc).__name__}", retryable=True) from exc
        except requests.RequestException as exc:
            metrics.ENGINE_ERRORS.labels("request").inc()
            raise _Attempt(f"request error: {type(exc).__name__}", retryable=False) from exc
        if resp.status_code != 200:
            metrics.ENGINE_ERRORS.labels(f"http_{resp.status_code}").inc()
            detail = f"OPA answered HTTP {resp.status_code}: {resp.text[:300]!r}"
            raise _Attempt(
                detail,
                retryable=resp.status_code in _RETRYABLE_STATUS,
                retry_after_s=parse_retry_after(resp.headers.get("Retry-After")),
            )
        try:
            data = resp.json()
        except ValueError as exc:
            metrics.ENGINE_ERRORS.labels("bad_body").inc()
            raise _Attempt("OPA answered 200 with a body that is not JSON", retryable=False) from exc
        if not isinstance(data, dict):
            raise _Attempt("OPA answered 200 with a body that is not an object", retryable=False)
        return data

    def evaluate(self, policy_input: dict[str, Any], *, traceparent: str | None = None) -> PolicyDecision:
        """Query the sidecar within the deadline; see the module docstring for retries."""
        s = self._s
        deadline = time.monotonic() + s.opa_deadline_ms / 1000
        headers = {"traceparent": traceparent} if traceparent else {}
        body = {"input": policy_input}
        self._budget.record_request()
        last: _Attempt | None = None
        for attempt in range(1, s.opa_max_attempts + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0.001:
                break
            timeout = (min(s.opa_connect_timeout_ms / 1000, remaining), min(s.opa_read_timeout_ms / 1000, remaining))
            try:
                data = self._attempt(body, timeout, headers)
            except _Attempt as failed:
                last = failed
                log.warning("OPA attempt %d failed: %s", attempt, failed, extra={"event": "opa_attempt_failed"})
                if not failed.retryable or attempt == s.opa_max_attempts:
                    break
                backoff = random.uniform(0, min(s.opa_backoff_cap_ms, s.opa_backoff_base_ms * 2**attempt) / 1000)
                wait = max(backoff, failed.retry_after_s or 0.0)
                # Do not start a retry that cannot both wait and answer before the deadline.
                if time.monotonic() + wait + 0.01 >= deadline or not self._budget.try_spend():
                    break
                time.sleep(wait)
                continue
            self._remember_revision(data)
            return normalize(data.get("result"), defined="result" in data, engine_decision_id=_str(data.get("decision_id")))
        retry_after = 1
        if last is not None and last.retry_after_s is not None and math.isfinite(last.retry_after_s):
            retry_after = max(1, min(int(math.ceil(last.retry_after_s)), 3600))
        raise DependencyUnavailable(
            "policy engine is unavailable",
            retry_after_s=retry_after,
            log_detail=str(last) if last else "OPA deadline exceeded",
        )

    def _remember_revision(self, data: dict[str, Any]) -> None:
        provenance = data.get("provenance")
        if not isinstance(provenance, dict):
            return
        bundles = provenance.get("bundles")
        if isinstance(bundles, dict) and bundles:
            revisions = [
                f"{name}:{info.get('revision')}"
                for name, info in sorted(bundles.items())
                if isinstance(info, dict) and isinstance(info.get("revision"), str)
            ]
            if revisions:
                self._revision = ",".join(revisions)
                return
        if isinstance(provenance.get("revision"), str):
            self._revision = provenance["revision"]

    def revision(self) -> str:
        """The bundle revision OPA last reported (``provenance``), else ``unknown``."""
        return self._revision

    def probe(self) -> None:
        """``GET /health`` on the sidecar; raises ``DependencyUnavailable``."""
        url = self._s.opa_url.rstrip("/") + "/health"
        try:
            resp = self._http().get(url, timeout=(self._s.opa_connect_timeout_ms / 1000, 1.0))
        except requests.RequestException as exc:
            raise DependencyUnavailable("policy engine is unavailable", log_detail=str(exc)) from exc
        if resp.status_code != 200:
            raise DependencyUnavailable("policy engine is unavailable", log_detail=f"OPA /health {resp.status_code}")


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and len(value) <= 128 else None
