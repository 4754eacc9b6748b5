"""Console sessions: server-side in Redis, found by an opaque cookie (DESIGN §5 console).

    tg:{console}:s:<sha256 of the session id>   string   the ``ConsoleSession`` JSON, TTL = its life

The cookie holds only the random session id (``HttpOnly``, ``SameSite=Lax``, ``Secure`` unless
``TOOLGATE_CONSOLE_SECURE_COOKIES=false``, path ``/console``); Redis keys hold its SHA-256, so a
Redis reader cannot take over a session. Each session has its own CSRF token, compared in
constant time on every POST. Sign-out deletes the session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from app.errors import DependencyUnavailable
from app.models import Subject
from app.redis_client import RedisConnection

COOKIE = "tg_console"
LOGIN_COOKIE = "tg_console_login"


class ConsoleSession(BaseModel):
    """A signed-in person: the subject (from the identity provider's claims), the CSRF token and
    the session's end (Unix seconds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    subject: Subject
    csrf: str
    expires_at: float
    via: str


def _key(session_id: str) -> str:
    return "tg:{console}:s:" + hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class SessionStore:
    """Console sessions in the process's ``RedisConnection``; every method raises
    ``DependencyUnavailable`` (503) when Redis fails."""

    def __init__(self, redis: RedisConnection, ttl_s: int) -> None:
        self._redis = redis
        self._ttl_s = ttl_s

    def create(self, subject: Subject, via: str) -> tuple[str, ConsoleSession]:
        """A new session for ``subject``; returns (session id for the cookie, session)."""
        session_id = secrets.token_urlsafe(32)
        session = ConsoleSession(subject=subject, csrf=secrets.token_urlsafe(32), expires_at=time.time() + self._ttl_s, via=via)
        text = session.model_dump_json()
        self._redis.run("console session", lambda client: client.set(_key(session_id), text, ex=self._ttl_s))
        return session_id, session

    def get(self, session_id: str | None) -> ConsoleSession | None:
        """The live session of ``session_id`` (None: none, expired or malformed cookie)."""
        if not session_id or len(session_id) > 100:
            return None
        text: Any = self._redis.run("console session", lambda client: client.get(_key(session_id)))
        if text is None:
            return None
        try:
            session = ConsoleSession.model_validate_json(text)
        except ValidationError:
            raise DependencyUnavailable(log_detail="console session is unreadable") from None
        return session if session.expires_at > time.time() else None

    def delete(self, session_id: str | None) -> None:
        if session_id:
            self._redis.run("console session", lambda client: client.delete(_key(session_id)))


def csrf_ok(session: ConsoleSession, presented: str | None) -> bool:
    """Whether a form's CSRF token is the session's (constant time)."""
    return bool(presented) and hmac.compare_digest(session.csrf.encode(), (presented or "").encode())
