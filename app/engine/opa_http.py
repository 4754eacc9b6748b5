"""The OPA sidecar engine: OPA's REST Data API, ``POST /v1/data/<path>`` with ``{"input": ...}``.

The decision query uses ``app.engine.deadline_http`` (one keep-alive connection per thread):
explicit connect and read timeouts per attempt, both cut to the time left, and one deadline
(``opa_deadline_ms``) that bounds the whole call, connects and every read across attempts
included, even against a server that trickles its answer. ``strict-builtin-errors`` on every
query, ``provenance`` to learn the bundle revision of the answer, and the ``traceparent``
header forwarded.

Why not opa-python-client for the query: its ``OpaClient.query_rule`` takes one client-wide
``timeout`` (neither a separate connect and read timeout per attempt nor one cut to the time
left before a deadline), sends only session-wide headers (a per-call ``traceparent`` would mean
mutating a session shared by the worker's threads), retries through urllib3's ``Retry`` on its
own schedule (500, 502, 504, without our budget or ``Retry-After``), and, on requests, bounds
each socket read only, so a trickling sidecar holds a call past any deadline. It is used for
what has no deadline: readiness (``/health?bundles``) and the sidecar's bundle status
(``/v1/status``), in ``probe`` and ``status``; and for ``toolgate policy push``.

Retries are done here and only here: at most ``opa_max_attempts`` attempts inside the
deadline, full-jitter exponential backoff (base ``opa_backoff_base_ms``, cap
``opa_backoff_cap_ms``; AWS Architecture Blog, "Exponential Backoff and Jitter"), a
``Retry-After`` (delta-seconds or HTTP-date, RFC 9110 §10.2.3) is honoured and never undercut,
and a retry that cannot finish before the deadline is not started. A retry budget (retries at
most ``opa_retry_budget_ratio`` of first attempts plus ``opa_retry_budget_floor``, gRPC A6
retry throttling in spirit) stops retry storms during an outage. Retried: connection errors,
timeouts, 429, 502, 503, 504. Not retried: a 500 (an evaluation error is deterministic) or any
other status; those fail closed with ``DependencyUnavailable``. A 200 without ``result`` is an
undefined decision: deny.

Revision: the bundle revision in the answer's ``provenance`` (one bundle: its revision; several:
``name:revision`` joined by commas), carried by the decision it came with.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import math
import random
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import requests

from app import metrics
from app.engine import wire
from app.engine.base import PolicyModules, RawResult, normalize
from app.engine.deadline_http import DeadlineClient, DeadlineExceeded, ResponseTooLarge
from app.engine.status import WorkerStatusBoard
from app.errors import DependencyUnavailable
from app.models import PolicyDecision
from app.policy.bundle import PolicyLoadError, read_directory
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
    """``PolicyEngine`` backed by an OPA server's REST Data API (see the module docstring)."""

    name = "opa"

    def __init__(self, settings: Settings, *, status_board: WorkerStatusBoard | None = None) -> None:
        self._s = settings
        self._path = _data_path(settings.decision_path)
        self._http = DeadlineClient(settings.opa_url)
        self._budget = RetryBudget(settings.opa_retry_budget_ratio, settings.opa_retry_budget_floor)
        self._revision = "unknown"
        self._board = status_board or WorkerStatusBoard(None)
        self._client_lock = threading.Lock()
        self._client: Any = None

    def _attempt(self, body: bytes, deadline: float, headers: dict[str, str], path: str | None = None) -> dict[str, Any]:
        s = self._s
        try:
            answer = self._http.post(
                path or self._path, body, headers=headers, deadline=deadline,
                connect_timeout_s=s.opa_connect_timeout_ms / 1000, read_timeout_s=s.opa_read_timeout_ms / 1000,
            )
        except (DeadlineExceeded, TimeoutError) as exc:
            metrics.ENGINE_ERRORS.labels("timeout").inc()
            raise _Attempt(f"timeout: {type(exc).__name__}", retryable=True) from exc
        except ResponseTooLarge as exc:
            metrics.ENGINE_ERRORS.labels("bad_body").inc()
            raise _Attempt(str(exc), retryable=False) from exc
        except (OSError, http.client.HTTPException) as exc:
            metrics.ENGINE_ERRORS.labels("connection").inc()
            raise _Attempt(f"connection error: {type(exc).__name__}", retryable=True) from exc
        if answer.status != 200:
            metrics.ENGINE_ERRORS.labels(f"http_{answer.status}").inc()
            detail = f"OPA answered HTTP {answer.status}: {answer.body[:300]!r}"
            raise _Attempt(
                detail,
                retryable=answer.status in _RETRYABLE_STATUS,
                retry_after_s=parse_retry_after(answer.headers.get("retry-after")),
            )
        try:
            data = wire.loads(answer.body)
        except (ValueError, UnicodeDecodeError) as exc:
            metrics.ENGINE_ERRORS.labels("bad_body").inc()
            raise _Attempt("OPA answered 200 with a body that is not JSON", retryable=False) from exc
        if not isinstance(data, dict):
            metrics.ENGINE_ERRORS.labels("bad_body").inc()
            raise _Attempt("OPA answered 200 with a body that is not an object", retryable=False)
        return data

    def evaluate(self, policy_input: dict[str, Any], *, traceparent: str | None = None) -> PolicyDecision:
        """Query the sidecar within the deadline; see the module docstring for retries."""
        s = self._s
        deadline = time.monotonic() + s.opa_deadline_ms / 1000
        headers = {"Content-Type": "application/json"}
        if traceparent:
            headers["traceparent"] = traceparent
        body = wire.dumps({"input": policy_input}, _json_dumps)
        self._budget.record_request()
        last: _Attempt | None = None
        for attempt in range(1, s.opa_max_attempts + 1):
            if deadline - time.monotonic() <= 0.001:
                break
            try:
                data = self._attempt(body, deadline, headers)
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
            revision = self._remember_revision(data)
            return normalize(
                data.get("result"), defined="result" in data, engine_decision_id=_str(data.get("decision_id")),
                policy_revision=revision,
            )
        retry_after = 1
        if last is not None and last.retry_after_s is not None and math.isfinite(last.retry_after_s):
            retry_after = max(1, min(math.ceil(last.retry_after_s), 3600))
        raise DependencyUnavailable(
            "policy engine is unavailable",
            retry_after_s=retry_after,
            log_detail=str(last) if last else "OPA deadline exceeded",
        )

    def evaluate_document(self, path: str, policy_input: dict[str, Any]) -> RawResult:
        """Query ``data.<path>`` once within the deadline, unnormalized (``PolicyEngine``);
        the revision is the answer's provenance (``unknown`` when it names none)."""
        body = wire.dumps({"input": policy_input}, _json_dumps)
        deadline = time.monotonic() + self._s.opa_deadline_ms / 1000
        try:
            data = self._attempt(body, deadline, {"Content-Type": "application/json"}, _data_path(path))
        except _Attempt as failed:
            raise DependencyUnavailable("policy engine is unavailable", log_detail=str(failed)) from None
        revision = self._remember_revision(data) or "unknown"
        return RawResult(data.get("result"), "result" in data, revision)

    def _remember_revision(self, data: dict[str, Any]) -> str | None:
        """The revision in the answer's provenance (None when it names none); remembered and
        published when it changed."""
        revision = provenance_revision(data.get("provenance"))
        if revision is not None and revision != self._revision:
            self._revision = revision
            self._board.publish(self.status(with_sidecar=False))
        return revision

    def revision(self) -> str:
        """The bundle revision OPA last reported (``provenance``), else ``unknown``."""
        return self._revision

    def policy_modules(self) -> PolicyModules | None:
        """The sidecar's modules (``GET /v1/policies``: each module's id and raw text) under the
        revision its decisions named before and after the read; None when that revision is not
        known yet, changed meanwhile, or the sidecar cannot be read."""
        before = self._revision
        if before == "unknown":
            return None
        client = self._opa_client()
        try:
            answer = client._session.get(f"{client.root_url}/policies", timeout=client.timeout)
            answer.raise_for_status()
            modules = {str(m["id"]): str(m["raw"]).encode() for m in answer.json().get("result") or []}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("could not read the sidecar's policy modules: %s", exc, extra={"event": "sidecar_policies_unreadable"})
            return None
        return PolicyModules(before, modules) if self._revision == before else None

    # -- sidecar management (opa-python-client) --------------------------------------------
    def _opa_client(self) -> Any:
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    self._client = build_opa_client(self._s.opa_url, timeout_s=max(self._s.opa_connect_timeout_ms / 1000, 1.0))
        return self._client

    def probe(self) -> None:
        """Ready when the sidecar answers ``GET /health?bundles`` with 200 (every configured
        bundle activated); raises ``DependencyUnavailable``."""
        if not self._opa_client().check_health(query={"bundles": "true"}):
            raise DependencyUnavailable("policy engine is unavailable", log_detail="OPA /health?bundles is not 200")

    def status(self, *, with_detail: bool = True, with_sidecar: bool = True) -> dict[str, Any]:
        """``{"engine", "url", "revision", "sidecar", "configured_revision",
        "serves_configured_revision"}``: the revision of this worker's last decision (None
        before the first) and, with ``with_sidecar``, the sidecar's view
        (``sidecar_bundle_status``) beside the revision of ``TOOLGATE_POLICY_DIR`` (with the
        pushed tenant data over it; None when the directory cannot be read) and whether the
        sidecar's active bundle is that revision (None when either is unknown)."""
        seen = None if self._revision == "unknown" else self._revision  # no decision yet in this worker
        out: dict[str, Any] = {"engine": self.name, "url": self._s.opa_url, "revision": seen}
        if with_sidecar:
            sidecar = sidecar_bundle_status(self._opa_client(), self._s.opa_bundle_name, with_detail=with_detail)
            active = (sidecar["bundle"] or {}).get("active_revision")
            configured = _directory_revision(self._s)
            out["sidecar"] = sidecar
            out["configured_revision"] = configured
            out["serves_configured_revision"] = None if active is None or configured is None else active == configured
        return out

    def workers(self) -> list[dict[str, Any]]:
        """Every live worker's last published status (the revision each last saw)."""
        if not self._board.own():
            self._board.publish(self.status(with_sidecar=False))
        return self._board.read_all()


def _data_path(document: str) -> str:
    """The Data API path that evaluates ``data.<document>`` with strict builtin errors and
    provenance."""
    return "/v1/data/" + document + "?strict-builtin-errors=true&provenance=true"


def _directory_revision(settings: Settings) -> str | None:
    """The revision of the bundle ``toolgate policy serve-bundle`` would build from the
    configured policy directory and tenant data; None when it cannot be read."""
    try:
        return read_directory(settings.policy_dir, tenant_data_dir=settings.tenant_data_dir).revision
    except PolicyLoadError:
        return None


def provenance_revision(provenance: Any) -> str | None:
    """The revision named by an OPA ``provenance`` object: one bundle's revision, several
    bundles as ``name:revision`` joined by commas, else the legacy top-level ``revision``."""
    if not isinstance(provenance, dict):
        return None
    bundles = provenance.get("bundles")
    if isinstance(bundles, dict) and bundles:
        revisions = {
            name: info["revision"]
            for name, info in sorted(bundles.items())
            if isinstance(info, dict) and isinstance(info.get("revision"), str)
        }
        if len(revisions) == 1:
            return next(iter(revisions.values()))
        if revisions:
            return ",".join(f"{name}:{revision}" for name, revision in revisions.items())
    revision = provenance.get("revision")
    return revision if isinstance(revision, str) and revision else None


def build_opa_client(opa_url: str, *, timeout_s: float) -> Any:
    """An ``opa_client.opa.OpaClient`` for ``opa_url`` with its own retries off and proxies
    from the environment ignored. Raises ``ValueError`` for a URL with a path (the client
    addresses ``scheme://host:port/v1`` only)."""
    from opa_client.opa import OpaClient

    parts = urlsplit(opa_url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path.strip("/"):
        raise ValueError(f"the OPA URL must be http(s)://host:port: {opa_url!r}")
    client = OpaClient(
        host=parts.hostname, port=parts.port or (443 if parts.scheme == "https" else 80),
        ssl=parts.scheme == "https", retries=0, timeout=timeout_s,
    )
    client._session.trust_env = False  # a loopback sidecar is never reached through a proxy
    return client


def sidecar_bundle_status(client: Any, bundle_name: str, *, with_detail: bool = True) -> dict[str, Any]:
    """The sidecar's bundle state: ``{"bundles_ready": bool, "bundle": {...} | None,
    "status_api": "ok" | "disabled" | "unreachable"}``. ``bundle`` holds the named bundle's
    ``active_revision``, ``last_successful_activation``, ``last_successful_download`` and
    ``last_request`` from ``GET /v1/status`` (OPA's status plugin must be on, e.g.
    ``status: {console: true}``), and with ``with_detail`` its ``code``, ``message`` and
    ``errors`` of the last failed activation."""
    ready = client.check_health(query={"bundles": "true"})
    out: dict[str, Any] = {"bundles_ready": ready, "bundle": None, "status_api": "ok"}
    try:
        document = client.get_status()
    except requests.HTTPError:
        out["status_api"] = "disabled"
        return out
    except (requests.RequestException, ValueError):
        out["status_api"] = "unreachable"
        return out
    bundles = ((document or {}).get("result") or {}).get("bundles") or {}
    info = bundles.get(bundle_name)
    if isinstance(info, dict):
        keys = ["name", "active_revision", "last_successful_activation", "last_successful_download", "last_request"]
        if with_detail:
            keys += ["code", "message", "errors"]
        out["bundle"] = {k: info[k] for k in keys if k in info}
        out["bundle"]["failing"] = bool(info.get("code") or info.get("errors"))
    return out


def _json_dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and len(value) <= 128 else None
