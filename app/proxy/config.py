"""The nginx configuration of the proxy in front of gunicorn, rendered from the settings.

What it does and why:

- Requests are read whole by nginx (``proxy_request_buffering on``, bodies kept in memory up to
  ``TOOLGATE_MAX_BODY_BYTES``) within ``TOOLGATE_PROXY_CLIENT_TIMEOUT_S`` per read of headers
  and body, before one upstream connection is used: hundreds of slow or idle clients cost nginx
  a few kilobytes each and gunicorn nothing.
- A body over the limit, a malformed request (an unknown ``Transfer-Encoding`` too: nginx's
  501 becomes this 400), a method nginx refuses itself (``TRACE``), a header block too large,
  or an upstream that does not answer get the gateway's structured error body (DESIGN §7) with
  a request id, never nginx's HTML page;
  an unreachable upstream is ``503 DEPENDENCY_UNAVAILABLE`` (retryable, with ``Retry-After``).
  The error bodies are internal locations reached by URI, not named ones: nginx cannot redirect
  a request whose request line it could not parse (``%00`` in the path) to a named location and
  would answer its own HTML 500. A request URI longer than ``MAX_REQUEST_URI`` is refused here
  with the structured 414 because gunicorn would refuse its request line with an HTML 414.
- The client's ``Host`` header goes upstream as it came (``$http_host``, port included), so the
  URLs the gateway builds from it (the console's trailing-slash redirect, the AuthZEN metadata)
  point at the address the client used, not at port 80.
- nginx never retries a request on the upstream (``proxy_next_upstream off``): a decide call
  may reserve an idempotency key, and only the caller decides to retry.
- Access logs are off (the gateway logs every request with its id); ``X-Forwarded-For`` and
  ``X-Forwarded-Proto`` tell the gateway who called.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from app.settings import Settings

_ERRORS = {
    "bad_request": (400, "VALIDATION_ERROR", "request is not valid", False),
    "too_large": (413, "VALIDATION_ERROR", "request body is too large", False),
    "uri_too_long": (414, "VALIDATION_ERROR", "request URI is too long", False),
    "headers_too_large": (431, "VALIDATION_ERROR", "request headers are too large", False),
    "unavailable": (503, "DEPENDENCY_UNAVAILABLE", "a dependency is unavailable; retry later", True),
    "not_found": (404, "NOT_FOUND", "no such endpoint", False),
    "method_not_allowed": (405, "VALIDATION_ERROR", "method not allowed for this endpoint", False),
}
ERROR_PREFIX = "/.toolgate-proxy-error/"
MAX_REQUEST_URI = 4000  # bytes; gunicorn's limit_request_line (4094) covers method, URI and version


@dataclass(frozen=True)
class ProxyPaths:
    """Where nginx keeps its pid file, error log and temporary files (a writable directory);
    ``log_to_stderr``: the error log goes to stderr (in a container)."""

    state_dir: Path
    log_to_stderr: bool = False

    @property
    def pid(self) -> Path:
        return self.state_dir / "nginx.pid"

    @property
    def error_log(self) -> Path | str:
        return "stderr" if self.log_to_stderr else self.state_dir / "nginx-error.log"

    def temp(self, kind: str) -> Path:
        """The directory of one kind of temporary file (nginx creates it in ``state_dir``)."""
        return self.state_dir / f"nginx-{kind}"


def _upstream(bind: str) -> str:
    """gunicorn's ``bind`` as an nginx ``server`` address (``unix:`` paths as nginx writes them)."""
    return bind if not bind.startswith("unix:") else "unix:" + bind.removeprefix("unix:")


def _error_location(name: str) -> str:
    """An internal location answering the structured error ``name`` (nginx fills ``$request_id``)."""
    status, code, message, retryable = _ERRORS[name]
    error: dict[str, object] = {"code": code, "message": message, "retryable": retryable}
    if retryable:
        error["retry_after_seconds"] = 1
    text = json.dumps({"ok": False, "error": error, "request_id": "$request_id"}, separators=(",", ":"))
    retry = "        add_header Retry-After 1 always;\n" if retryable else ""
    return (
        f"    location = {ERROR_PREFIX}{name} {{\n"
        "        internal;\n"
        "        default_type application/json;\n"
        "        add_header X-Request-Id $request_id always;\n"
        '        add_header Cache-Control "no-store" always;\n'
        f"{retry}"
        f"        return {status} '{text}';\n"
        "    }\n"
    )


def upstream_read_timeout_s(settings: Settings) -> int:
    """How long nginx waits for gunicorn's answer (seconds): 30, or longer than the longest
    approval long-poll (``TOOLGATE_APPROVAL_MAX_WAIT_S``) plus a margin, so that a held
    ``GET /v1/approvals/<id>?wait=`` answers instead of timing out as a 503."""
    return max(30, settings.approval_max_wait_s + 15)


def render(settings: Settings, paths: ProxyPaths) -> str:
    """The whole ``nginx.conf``, run in the foreground (``daemon off``) so that its supervisor
    (``scripts/serve.sh``, the container runtime, a test) owns the process. The upstream is
    gunicorn at ``TOOLGATE_BIND``; nginx listens on ``TOOLGATE_PROXY_LISTEN``."""
    timeout = settings.proxy_client_timeout_s
    upstream_timeout = upstream_read_timeout_s(settings)
    body = settings.max_body_bytes
    temp = paths.temp
    return f"""# Generated by `toolgate proxy config` from the settings; do not edit (app/proxy/config.py).
worker_processes {settings.proxy_workers};
daemon off;
pid {paths.pid};
error_log {paths.error_log} warn;

events {{
    worker_connections {settings.proxy_max_connections};
}}

http {{
    access_log off;
    server_tokens off;
    default_type application/octet-stream;
    client_header_timeout {timeout}s;
    client_body_timeout {timeout}s;
    send_timeout {timeout}s;
    keepalive_timeout {settings.proxy_keepalive_timeout_s}s;
    keepalive_requests 10000;
    client_header_buffer_size 4k;
    large_client_header_buffers 4 16k;
    client_max_body_size {body};
    client_body_buffer_size {body};
    client_body_temp_path {temp("body")};
    proxy_temp_path {temp("proxy")};
    fastcgi_temp_path {temp("fastcgi")};
    uwsgi_temp_path {temp("uwsgi")};
    scgi_temp_path {temp("scgi")};
    proxy_request_buffering on;
    proxy_buffering on;
    proxy_max_temp_file_size 0;
    proxy_http_version 1.1;

    upstream toolgate {{
        server {_upstream(settings.bind)};
        keepalive 64;
    }}

    server {{
        listen {settings.proxy_listen} backlog=4096;

        error_page 400 501 = {ERROR_PREFIX}bad_request;
        error_page 404 = {ERROR_PREFIX}not_found;
        error_page 405 = {ERROR_PREFIX}method_not_allowed;
        error_page 413 = {ERROR_PREFIX}too_large;
        error_page 414 = {ERROR_PREFIX}uri_too_long;
        error_page 431 494 = {ERROR_PREFIX}headers_too_large;
        error_page 502 503 504 = {ERROR_PREFIX}unavailable;

        location / {{
            if ($request_uri ~ "^.{{{MAX_REQUEST_URI + 1}}}") {{
                return 414;
            }}
            proxy_pass http://toolgate;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_connect_timeout 2s;
            proxy_send_timeout {upstream_timeout}s;
            proxy_read_timeout {upstream_timeout}s;
            proxy_next_upstream off;
        }}

{"".join(_error_location(name) for name in _ERRORS)}    }}
}}
"""
