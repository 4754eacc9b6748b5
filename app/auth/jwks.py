"""The issuer's key set (JWKS, RFC 7517 §5), fetched with PyJWT and cached as one whole set.

``JwksCache.get_keys(kid)`` returns the usable signature keys published under ``kid``; see the
class docstring for the timing of fetches, refetches and the last-known-good grace period.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jwt import PyJWK, PyJWKClient

from app import metrics
from app.auth.keys import key_family, key_fits
from app.auth.rejection import exception_text
from app.errors import DependencyUnavailable
from app.jwa import ALG_FAMILY
from app.settings import JwtSettings, SettingsError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JwksKey:
    """One usable verification key from the JWKS: its ``kid``, the JWK ``alg`` member (or
    None when the JWK does not restrict it) and the public key object."""

    kid: str
    alg: str | None
    key: Any


@dataclass(frozen=True)
class _Snapshot:
    keys: dict[str, tuple[JwksKey, ...]]
    fetched_at: float


_EMPTY = _Snapshot(keys={}, fetched_at=float("-inf"))


class JwksCache:
    """The JWKS of the issuer, cached as one whole set (no per-kid cache).

    ``get_keys(kid) -> tuple[JwksKey, ...]`` (empty when the kid is unknown). Raises
    ``DependencyUnavailable`` when no set is usable: never fetched successfully, or expired
    beyond ``grace_s`` while the endpoint fails.

    Timing (all in seconds, ``clock`` is monotonic):

    * a set is fresh for ``lifespan_s`` after its fetch; an expired set is refreshed by the
      first request that needs it (one thread fetches, the others wait on the lock and reuse
      its result);
    * an unknown ``kid`` refetches unless an unknown ``kid`` already refetched in the last
      ``refetch_cooldown_s``: a key published after the last fetch verifies at once, and a flood
      of random kids costs at most one fetch per period (fetches for expiry do not count);
    * a failed fetch keeps the last-known-good set usable until ``lifespan_s + grace_s`` after
      its fetch, and blocks further expiry-driven attempts for ``failure_backoff_s``.

    ``fetch_count`` counts fetch attempts (successful or not); ``last_error`` keeps the text of
    the last failed fetch. Thread-safe. JWKS sources: RFC 7517 §5; pyjwt #1051 (unbounded
    per-kid cache), #1162 (cache wiped on failure).
    """

    def __init__(
        self,
        url: str,
        *,
        lifespan_s: float,
        refetch_cooldown_s: float,
        timeout_s: float,
        grace_s: float,
        failure_backoff_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        fetcher: Callable[[], Any] | None = None,
    ) -> None:
        if lifespan_s <= 0 or refetch_cooldown_s < 0 or grace_s < 0 or timeout_s <= 0:
            raise ValueError("JWKS cache timings must be positive")
        self.url = url
        self.lifespan_s = float(lifespan_s)
        self.refetch_cooldown_s = float(refetch_cooldown_s)
        self.grace_s = float(grace_s)
        self.failure_backoff_s = float(failure_backoff_s)
        self._clock = clock
        if fetcher is None:
            client = PyJWKClient(
                url,
                cache_keys=False,
                cache_jwk_set=False,
                timeout=timeout_s,
                headers={"Accept": "application/json", "User-Agent": "toolgate"},
            )
            fetcher = client.fetch_data
        self._fetcher = fetcher
        self._lock = threading.Lock()
        self._snapshot: _Snapshot | None = None
        self._last_unknown_kid_fetch_at: float | None = None
        self._retry_not_before = float("-inf")
        self.fetch_count = 0
        self.last_error: str | None = None

    @classmethod
    def from_settings(cls, settings: JwtSettings, **kw: Any) -> JwksCache:
        """Build from ``jwt_jwks_url``, ``jwt_jwks_cache_s``, ``jwt_jwks_refetch_cooldown_s``,
        ``jwt_jwks_timeout_ms`` and ``jwt_jwks_grace_s``."""
        if not settings.jwt_jwks_url:
            raise SettingsError("jwt_jwks_url is not set")
        return cls(
            settings.jwt_jwks_url,
            lifespan_s=settings.jwt_jwks_cache_s,
            refetch_cooldown_s=settings.jwt_jwks_refetch_cooldown_s,
            timeout_s=settings.jwt_jwks_timeout_ms / 1000.0,
            grace_s=settings.jwt_jwks_grace_s,
            **kw,
        )

    def get_keys(self, kid: str) -> tuple[JwksKey, ...]:
        """Keys published under ``kid`` (usually one). See the class docstring for timing."""
        snapshot = self._usable_snapshot()
        found = snapshot.keys.get(kid)
        if found:
            return found
        return self._refetch_for_unknown(kid).keys.get(kid, ())

    def fresh_for_s(self) -> float:
        """Seconds until the current key set expires (<= 0: expired, or never fetched)."""
        snapshot = self._snapshot
        return float("-inf") if snapshot is None else snapshot.fetched_at + self.lifespan_s - self._clock()

    def _is_fresh(self, snapshot: _Snapshot | None, now: float) -> bool:
        return snapshot is not None and now - snapshot.fetched_at < self.lifespan_s

    def _usable_snapshot(self) -> _Snapshot:
        snapshot = self._snapshot  # one atomic read; snapshots are immutable
        if self._is_fresh(snapshot, self._clock()):
            return snapshot  # type: ignore[return-value]
        with self._lock:
            now = self._clock()
            snapshot = self._snapshot
            if self._is_fresh(snapshot, now):
                return snapshot  # type: ignore[return-value]  # another thread refreshed it
            if now >= self._retry_not_before:
                fresh = self._fetch(now)
                if fresh is not None:
                    return fresh
            if snapshot is not None and now - snapshot.fetched_at < self.lifespan_s + self.grace_s:
                log.warning(
                    "JWKS refresh failed; serving the last-known-good key set",
                    extra={"event": "jwks_stale", "age_s": round(now - snapshot.fetched_at, 3)},
                )
                return snapshot
            raise DependencyUnavailable(log_detail=f"JWKS unavailable: {self.last_error}")

    def _refetch_for_unknown(self, kid: str) -> _Snapshot:
        with self._lock:
            now = self._clock()
            snapshot = self._snapshot or _EMPTY
            if kid in snapshot.keys:
                return snapshot  # another thread's fetch brought it in
            last = self._last_unknown_kid_fetch_at
            if last is not None and now - last < self.refetch_cooldown_s:
                return snapshot  # cooling down: at most one unknown-kid refetch per period
            self._last_unknown_kid_fetch_at = now
            return self._fetch(now) or snapshot

    def _fetch(self, now: float) -> _Snapshot | None:
        """One HTTP fetch (lock held). Returns the new snapshot, or None on any failure."""
        self.fetch_count += 1
        try:
            keys = self._index(self._fetcher())
        except Exception as exc:  # noqa: BLE001 - any failure keeps the last-known-good set
            self._retry_not_before = now + self.failure_backoff_s
            self.last_error = exception_text(exc)
            log.warning("JWKS fetch failed: %s", self.last_error, extra={"event": "jwks_fetch_failed"})
            metrics.JWKS_FETCHES.labels("error").inc()
            return None
        metrics.JWKS_FETCHES.labels("ok").inc()
        self.last_error = None
        self._retry_not_before = float("-inf")
        snapshot = _Snapshot(keys=keys, fetched_at=self._clock())
        self._snapshot = snapshot
        return snapshot

    @staticmethod
    def _index(data: Any) -> dict[str, tuple[JwksKey, ...]]:
        """Usable signature keys of a JWK Set document, by kid. Raises ValueError if none."""
        if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
            raise ValueError("JWKS document is not an object with a 'keys' list")
        index: dict[str, list[JwksKey]] = {}
        for jwk_data in data["keys"]:
            if not isinstance(jwk_data, dict):
                continue
            kid, alg = jwk_data.get("kid"), jwk_data.get("alg")
            use, key_ops = jwk_data.get("use"), jwk_data.get("key_ops")
            if not isinstance(kid, str) or not kid or jwk_data.get("kty") == "oct":
                continue
            if use not in (None, "sig"):
                continue  # RFC 7517 §4.2: only signature keys
            if key_ops is not None and (not isinstance(key_ops, list) or "verify" not in key_ops):
                continue  # RFC 7517 §4.3
            if alg is not None and alg not in ALG_FAMILY:
                continue
            try:
                key = PyJWK(jwk_data).key
            except Exception:  # noqa: BLE001 - skip unusable keys, like PyJWKSet does
                continue
            if key_family(key) is None or (alg is not None and not key_fits(alg, key)):
                continue  # private or symmetric material, or alg/kty mismatch
            index.setdefault(kid, []).append(JwksKey(kid=kid, alg=alg, key=key))
        if not index:
            raise ValueError("JWKS contains no usable signature keys")
        return {kid: tuple(keys) for kid, keys in index.items()}


