"""Signed webhooks on approval events (DESIGN §5): ``approval.requested``, ``approval.answered``,
``approval.escalated``, ``approval.expired``.

Each event is POSTed as JSON to ``TOOLGATE_WEBHOOK_URL`` with::

    Toolgate-Webhook-Id: wh_<random>            the same on every retry of one event
    Toolgate-Webhook-Timestamp: <unix seconds>  of this attempt
    Toolgate-Webhook-Signature: t=<timestamp>,kid=<kid>,v1=<hex HMAC-SHA256(secret, "<timestamp>." + body)>

so a receiver checks the MAC with the secret of ``kid`` (keys rotate by kid: the first key of
``TOOLGATE_WEBHOOK_KEYS`` signs), refuses a timestamp outside its tolerance (replays), and
dedupes by id (``verify_signature`` does the first two). Bodies: the ``toolgate`` format is
``{"id", "type", "created_at", "tenant", "approval": ApprovalView}`` (the input redacted as
everywhere); the ``slack`` format is a Slack incoming-webhook message (``text`` and
``blocks``, mrkdwn escaped).

Delivery is asynchronous and never slows or fails the call that raised the event: one thread per
worker takes events from a bounded queue in due order; a 2xx ends an event; a timeout, a
connection error, a 408/425/429 or a 5xx is retried after ``base * 2**(attempt-1)`` ms (capped,
with jitter) up to ``webhook_max_attempts``; any other answer, exhausted attempts and a full
queue dead-letter the event (``toolgate_webhook_dead_letters_total``, ``dead_letters``, a
warning log line naming id and type, never the body). Events of a worker that stops are lost:
webhooks are notifications, the decision log is the record.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import itertools
import json
import logging
import random
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import requests

from app import metrics
from app.settings import WebhookSettings
from app.timefmt import rfc3339_ms

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "Toolgate-Webhook-Signature"
TIMESTAMP_HEADER = "Toolgate-Webhook-Timestamp"
ID_HEADER = "Toolgate-Webhook-Id"
EVENT_TYPES = ("approval.requested", "approval.answered", "approval.escalated", "approval.expired")
_RETRIED_STATUSES = {408, 425, 429}


def sign(secret: bytes, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>." + body`` under ``secret``."""
    return hmac.new(secret, str(timestamp).encode("ascii") + b"." + body, hashlib.sha256).hexdigest()


def signature_header(kid: str, secret: bytes, timestamp: int, body: bytes) -> str:
    return f"t={timestamp},kid={kid},v1={sign(secret, timestamp, body)}"


def verify_signature(
    headers: Mapping[str, str], body: bytes, keys: Mapping[str, bytes], *, tolerance_s: int = 300, now: float | None = None
) -> bool:
    """A receiver's check: the signature header names a known kid, its MAC over the timestamp and
    ``body`` verifies (constant time) and the timestamp is within ``tolerance_s`` of ``now``."""
    parts = dict(p.split("=", 1) for p in headers.get(SIGNATURE_HEADER, "").split(",") if "=" in p)
    try:
        timestamp = int(parts["t"])
        secret = keys[parts["kid"]]
        mac = parts["v1"]
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance_s:
        return False
    return hmac.compare_digest(sign(secret, timestamp, body), mac)


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_message(event_type: str, tenant: str, approval: dict[str, Any]) -> dict[str, Any]:
    """A Slack incoming-webhook message for an approval event (mrkdwn, user text escaped)."""
    what = {
        "approval.requested": "needs approval",
        "approval.answered": "was answered",
        "approval.escalated": "is escalated (still unanswered)",
        "approval.expired": "expired unanswered",
    }[event_type]
    tool = approval["tool"]
    summary = f"{tool['name']} v{tool['version']} requested by {approval['requester']} {what}"
    lines = [f"*{_slack_escape(summary)}*", f"Reason: {_slack_escape(approval['request_reason'])}"]
    answer = approval.get("answer")
    if answer:
        verdict = "approved" if answer["approved"] else "denied"
        lines.append(f"{verdict.capitalize()} by {_slack_escape(answer['approver'])}: {_slack_escape(answer['reason'] or '-')}")
    else:
        lines.append(f"Expires {approval['expires_at']}")
    return {
        "text": _slack_escape(summary),
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}},
            {"type": "context", "elements": [
                {"type": "mrkdwn", "text": f"approval `{approval['approval_id']}` · tenant {_slack_escape(tenant)}"}
            ]},
        ],
    }


@dataclass(order=True)
class _Delivery:
    due: float
    seq: int
    event_id: str = field(compare=False)
    event_type: str = field(compare=False)
    body: bytes = field(compare=False)
    attempt: int = field(default=0, compare=False)


class WebhookNotifier:
    """Delivers approval events to one URL (see the module docstring). Thread-safe; build one per
    worker; the delivery thread starts with the first event (after gunicorn forked).

    ``post(url, body, headers, timeout_s) -> status`` and ``clock`` may be replaced by tests of
    the retry schedule; by default a ``requests`` session posts.
    """

    def __init__(
        self,
        settings: WebhookSettings,
        *,
        post: Callable[[str, bytes, dict[str, str], float], int] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not settings.webhook_url:
            raise ValueError("WebhookNotifier needs webhook_url")
        keys = settings.webhook_signing_keys
        if not keys:
            raise ValueError("WebhookNotifier needs webhook_keys")
        self._url = settings.webhook_url
        self._kid, self._secret = keys[0]
        self._format = settings.webhook_format
        self._timeout_s = settings.webhook_timeout_ms / 1000
        self._max_attempts = settings.webhook_max_attempts
        self._base_s = settings.webhook_backoff_base_ms / 1000
        self._cap_s = settings.webhook_backoff_cap_ms / 1000
        self._queue_size = settings.webhook_queue_size
        self._post = post or self._requests_post
        self._clock = clock
        self._session: requests.Session | None = None
        self._heap: list[_Delivery] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._busy = 0
        self._closed = False
        self.dead_letters = 0
        self.delivered = 0

    # --- producing -----------------------------------------------------------------------

    def notify(self, event_type: str, tenant: str, approval: dict[str, Any]) -> None:
        """Queue ``event_type`` for ``approval`` (an ``ApprovalView`` as JSON). Never raises for
        delivery problems; a full queue dead-letters the event."""
        if event_type not in EVENT_TYPES:
            raise ValueError(f"unknown webhook event {event_type}")
        event_id = "wh_" + secrets.token_urlsafe(18)
        if self._format == "slack":
            payload: dict[str, Any] = slack_message(event_type, tenant, approval)
        else:
            payload = {"id": event_id, "type": event_type, "created_at": rfc3339_ms(int(self._clock() * 1000)),
                       "tenant": tenant, "approval": approval}
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        with self._cond:
            if self._closed or len(self._heap) >= self._queue_size:
                self._dead(event_id, event_type, "queue full" if not self._closed else "notifier closed")
                return
            heapq.heappush(self._heap, _Delivery(self._clock(), next(self._seq), event_id, event_type, body))
            self._ensure_thread()
            self._cond.notify()

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="toolgate-webhooks", daemon=True)
            self._thread.start()

    # --- delivering ----------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (not self._heap or self._heap[0].due > self._clock()):
                    wait = None if not self._heap else max(0.0, self._heap[0].due - self._clock())
                    self._cond.wait(timeout=wait)
                if self._closed:
                    return
                delivery = heapq.heappop(self._heap)
                self._busy += 1
            try:
                self._attempt(delivery)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def _attempt(self, delivery: _Delivery) -> None:
        delivery.attempt += 1
        timestamp = int(self._clock())
        headers = {
            "Content-Type": "application/json",
            ID_HEADER: delivery.event_id,
            TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: signature_header(self._kid, self._secret, timestamp, delivery.body),
        }
        try:
            status = self._post(self._url, delivery.body, headers, self._timeout_s)
        except requests.RequestException as exc:
            status, problem = None, type(exc).__name__
        else:
            problem = f"HTTP {status}"
        if status is not None and 200 <= status < 300:
            metrics.WEBHOOK_DELIVERIES.labels("ok").inc()
            with self._cond:
                self.delivered += 1
            return
        permanent = status is not None and not (status >= 500 or status in _RETRIED_STATUSES)
        if permanent or delivery.attempt >= self._max_attempts:
            with self._cond:
                self._dead(delivery.event_id, delivery.event_type, f"{problem} after {delivery.attempt} attempts")
            return
        metrics.WEBHOOK_DELIVERIES.labels("retry").inc()
        delay = min(self._cap_s, self._base_s * 2 ** (delivery.attempt - 1)) * random.uniform(0.8, 1.0)
        with self._cond:
            delivery.due = self._clock() + delay
            delivery.seq = next(self._seq)
            heapq.heappush(self._heap, delivery)
            self._cond.notify()

    def _dead(self, event_id: str, event_type: str, why: str) -> None:
        """Count a dead letter (the caller holds the lock)."""
        self.dead_letters += 1
        metrics.WEBHOOK_DELIVERIES.labels("dead").inc()
        metrics.WEBHOOK_DEAD_LETTERS.inc()
        log.warning("webhook dead-lettered: %s", why, extra={"event": "webhook_dead_letter", "webhook_id": event_id,
                                                              "webhook_type": event_type})

    def _requests_post(self, url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
        if self._session is None:
            self._session = requests.Session()
        response = self._session.post(url, data=body, headers=headers, timeout=timeout_s, allow_redirects=False)
        response.close()
        return response.status_code

    # --- tests and shutdown ----------------------------------------------------------------

    def drain(self, timeout_s: float) -> bool:
        """Wait until no event is queued or in flight (True), at most ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._heap or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(timeout=min(left, 0.05))
        return True

    def close(self) -> None:
        """Stop the delivery thread; queued events are dropped (not counted)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
