"""Recently verified bearer tokens, so that a caller's next requests skip the signature and
claim checks its token passed moments ago (verification was about a tenth of a decide call's
CPU in the benchmark; README "Performance").

``VerifiedTokenCache(max_entries, ttl_s, leeway_s)``: ``get(token) -> Subject | None`` and
``put(token, subject, exp, trusted_for_s=None)``. Keys are SHA-256 digests of the compact JWS,
so the cache holds no token. An entry is served for at most ``ttl_s`` seconds after its
verification, at most ``trusted_for_s`` (how long the verifying key stays trusted: the rest of
its JWKS set's lifespan, so a key removed from the JWKS stops verifying just as without this
cache), and never once the token's own ``exp`` has passed (with the same ``leeway_s`` as
PyJWT: ``now < exp + leeway``). Only successful verifications are stored, so a rejected token is
verified again every time. At most ``max_entries`` entries (least recently used dropped
first); ``max_entries == 0`` or ``ttl_s == 0`` turns the cache off. Thread-safe.
"""

from __future__ import annotations

import hashlib
import threading
import time

from cachetools import TTLCache

from app.models import Subject


class VerifiedTokenCache:
    """See the module docstring."""

    def __init__(self, max_entries: int, ttl_s: float, leeway_s: float) -> None:
        self._enabled = max_entries > 0 and ttl_s > 0
        self._ttl_s = ttl_s
        self._entries: TTLCache[bytes, tuple[Subject, float, float]] = TTLCache(
            maxsize=max(max_entries, 1), ttl=max(ttl_s, 1e-9), timer=time.monotonic
        )
        self._leeway_s = leeway_s
        self._lock = threading.Lock()

    @staticmethod
    def _key(token: str) -> bytes:
        return hashlib.sha256(token.encode("ascii")).digest()

    def get(self, token: str) -> Subject | None:
        """The subject of ``token`` if it was verified within ``ttl_s`` and has not expired."""
        if not self._enabled:
            return None
        key = self._key(token)
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            return None
        subject, exp, trusted_until = entry
        if time.time() >= exp + self._leeway_s or time.monotonic() >= trusted_until:
            with self._lock:
                self._entries.pop(key, None)
            return None
        return subject

    def put(self, token: str, subject: Subject, exp: float, trusted_for_s: float | None = None) -> None:
        """Remember that ``token`` (expiring at ``exp``, seconds since the epoch) verified as
        ``subject`` with a key trusted for ``trusted_for_s`` more seconds (None: as long as
        the process runs, a configured key)."""
        keep_s = self._ttl_s if trusted_for_s is None else min(self._ttl_s, trusted_for_s)
        if self._enabled and keep_s > 0:
            with self._lock:
                self._entries[self._key(token)] = (subject, float(exp), time.monotonic() + keep_s)
