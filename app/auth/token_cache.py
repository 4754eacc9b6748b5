"""Recently verified bearer tokens, so that a caller's next requests skip the signature and
claim checks its token passed moments ago (verification was about a tenth of a decide call's
CPU in the benchmark; docs/performance.md).

``VerifiedTokenCache(max_bytes, ttl_s, leeway_s)``: ``get(token) -> Subject | None`` and
``put(token, subject, exp, trusted_until=None)``. Keys are SHA-256 digests of the compact JWS,
so the cache holds no token. An entry is served for at most ``ttl_s`` seconds after its
verification, never at or after ``trusted_until`` (``time.monotonic()``: when the verifying
key stops being trusted, the end of its JWKS set's lifespan, so a key removed from the JWKS
stops verifying just as without this cache), and never once the token has expired by PyJWT's
rule (``int(exp) <= now - leeway``). Only successful verifications are stored, so a rejected
token is verified again every time. The entries' estimated size stays under ``max_bytes``
(least recently used dropped first; a subject larger than that is never stored);
``max_bytes == 0`` or ``ttl_s == 0`` turns the cache off. Thread-safe.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import time

from cachetools import TTLCache

from app.models import Subject

#: Estimated bytes of one entry besides its strings: digest, tuples, the Subject, cache links.
_ENTRY_OVERHEAD = 512


def entry_bytes(subject: Subject) -> int:
    """Estimated memory of the cache entry of ``subject``, in bytes."""
    strings = (subject.id, subject.tenant, *subject.roles)
    return _ENTRY_OVERHEAD + sum(sys.getsizeof(s) + 8 for s in strings)


class VerifiedTokenCache:
    """See the module docstring."""

    def __init__(self, max_bytes: int, ttl_s: float, leeway_s: float) -> None:
        self._enabled = max_bytes > 0 and ttl_s > 0
        self._ttl_s = ttl_s
        self._max_bytes = max(max_bytes, 1)
        self._entries: TTLCache[bytes, tuple[Subject, int, float]] = TTLCache(
            maxsize=self._max_bytes, ttl=max(ttl_s, 1e-9), timer=time.monotonic,
            getsizeof=lambda entry: entry_bytes(entry[0]),
        )
        self._leeway_s = leeway_s
        self._lock = threading.Lock()

    @staticmethod
    def _key(token: str) -> bytes:
        return hashlib.sha256(token.encode("ascii")).digest()

    def get(self, token: str) -> Subject | None:
        """The subject of ``token`` if it verified within ``ttl_s``, its key is still trusted
        and it has not expired."""
        if not self._enabled:
            return None
        key = self._key(token)
        with self._lock:
            entry = self._entries.get(key)
        if entry is None:
            return None
        subject, exp, trusted_until = entry
        if exp <= time.time() - self._leeway_s or time.monotonic() >= trusted_until:
            with self._lock:
                self._entries.pop(key, None)
            return None
        return subject

    def put(self, token: str, subject: Subject, exp: float, trusted_until: float | None = None) -> None:
        """Remember that ``token`` (expiring at ``exp``, seconds since the epoch) verified as
        ``subject`` with a key trusted until ``trusted_until`` (``time.monotonic()``; None: a
        configured key, trusted as long as the process runs)."""
        until = time.monotonic() + self._ttl_s
        if trusted_until is not None:
            until = min(until, trusted_until)
        if not self._enabled or until <= time.monotonic() or entry_bytes(subject) > self._max_bytes:
            return
        with self._lock:
            self._entries[self._key(token)] = (subject, int(exp), until)
