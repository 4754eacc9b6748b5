"""A development bundle service: ``GET /bundles/<name>.tar.gz`` answers the bundle of a policy
directory as it is now (rebuilt when its content hash changes, optionally signed), with
``ETag: "<revision>"`` and ``304 Not Modified`` for a matching ``If-None-Match``, as OPA's
bundle plugin and the embedded engine's URL source poll it. Production serves bundles built by
CI from a real bundle service (an object store, an OCI registry, a web server); this one lets
``scripts/serve.sh`` reload an OPA sidecar through OPA's own bundle polling.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from app.policy.bundle import (
    PolicyLoadError,
    build_tarball,
    read_directory,
    with_manifest,
)


class BundleCache:
    """The tarball of ``policy_dir`` with the pushed tenant data of ``tenant_data_dir`` over it,
    rebuilt when their content hash changes. ``sign``: a function from the bundle to its
    ``.signatures.json`` bytes, or None."""

    def __init__(
        self, policy_dir: Path, *, sign: Callable[[Any], bytes] | None = None, tenant_data_dir: Path | None = None
    ) -> None:
        self._dir = Path(policy_dir)
        self._tenant_data_dir = tenant_data_dir
        self._sign = sign
        self._lock = threading.Lock()
        self._revision: str | None = None
        self._tarball = b""

    def current(self) -> tuple[str, bytes]:
        """``(revision, tarball bytes)``; raises ``PolicyLoadError`` for an unreadable directory."""
        with self._lock:
            bundle = with_manifest(read_directory(self._dir, tenant_data_dir=self._tenant_data_dir))
            if bundle.revision != self._revision:
                signatures = self._sign(bundle) if self._sign else None
                self._tarball = build_tarball(bundle, signatures=signatures)
                self._revision = bundle.revision
            return bundle.revision, self._tarball


def make_server(cache: BundleCache, bundle_name: str, host: str, port: int) -> ThreadingHTTPServer:
    """A threaded server for ``cache`` at ``/bundles/<bundle_name>.tar.gz`` (not started)."""
    path = f"/bundles/{bundle_name}.tar.gz"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _plain(self, status: int, text: str) -> None:
            raw = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != path:
                self._plain(404, "not found\n")
                return
            try:
                revision, tarball = cache.current()
            except PolicyLoadError as exc:
                self._plain(503, f"{exc}\n")
                return
            etag = f'"{revision}"'
            if etag in [t.strip() for t in (self.headers.get("If-None-Match") or "").split(",")]:
                self.send_response(304)
                self.send_header("ETag", etag)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/gzip")
            self.send_header("ETag", etag)
            self.send_header("Content-Length", str(len(tarball)))
            self.end_headers()
            self.wfile.write(tarball)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server
