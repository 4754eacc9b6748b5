"""Where the embedded engine reads its policies: a policy directory, a bundle file, or an HTTP
bundle URL polled OPA bundle-service style (``If-None-Match`` with the last ``ETag``, ``304``
means unchanged).

``fetch()`` returns the bundle when it is new or changed since the last successful fetch and
None when it is unchanged; it raises ``PolicyLoadError`` for content that cannot be read (a
malformed tarball, an unreadable file) and ``BundleUnavailable`` when the source cannot be
reached (a missing file, a connection error, an HTTP error status). A bundle is returned once
per change, so a refused one is not refused again at every poll, only when it changes.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Protocol

import requests

from app.policy.bundle import PolicyBundle, read_directory, read_tarball


class BundleUnavailable(Exception):
    """The policy source cannot be reached right now (transient; the last good bundle stays)."""


class PolicySource(Protocol):
    """One place policies come from; see the module docstring."""

    #: Human-readable location (a path or URL), for status and logs.
    description: str

    def fetch(self) -> PolicyBundle | None: ...


class DirectorySource:
    """A policy directory with the pushed tenant data of ``tenant_data_dir`` over it; a change
    is a change of their content hash (``read_directory``)."""

    def __init__(self, policy_dir: Path, *, tenant_data_dir: Path | None = None) -> None:
        self._dir = Path(policy_dir)
        self._tenant_data_dir = tenant_data_dir
        self.description = str(self._dir)
        self._seen: str | None = None

    def fetch(self) -> PolicyBundle | None:
        bundle = read_directory(self._dir, tenant_data_dir=self._tenant_data_dir)
        if bundle.revision == self._seen:
            return None
        self._seen = bundle.revision
        return bundle


class BundleFileSource:
    """A bundle tarball on disk; a change is a change of its inode, size or modification time."""

    def __init__(self, path: Path) -> None:
        self._path = Path(path)
        self.description = str(self._path)
        self._seen: tuple[int, int, int] | None = None

    def fetch(self) -> PolicyBundle | None:
        try:
            stat = os.stat(self._path)
            key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            if key == self._seen:
                return None
            raw = self._path.read_bytes()
        except OSError as exc:
            raise BundleUnavailable(f"cannot read {self._path}: {exc.strerror}") from None
        self._seen = key
        return read_tarball(raw, source=str(self._path))


class BundleUrlSource:
    """A bundle served over HTTP(S) by a bundle service (an OPA-style bundle server, an object
    store, a web server). One ``requests.Session`` per source; ``timeout_s`` bounds connect and
    each read; redirects are not followed; proxies from the environment are not used."""

    def __init__(self, url: str, *, timeout_s: float, max_bytes: int) -> None:
        self.description = url
        self._url = url
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes
        self._etag: str | None = None
        self._session = requests.Session()
        self._session.trust_env = False
        self._lock = threading.Lock()

    def fetch(self) -> PolicyBundle | None:
        headers = {"Accept": "application/gzip, application/octet-stream"}
        if self._etag:
            headers["If-None-Match"] = self._etag
        with self._lock:
            try:
                with self._session.get(self._url, headers=headers, timeout=self._timeout_s, stream=True,
                                       allow_redirects=False) as resp:
                    if resp.status_code == 304:
                        return None
                    if resp.status_code != 200:
                        raise BundleUnavailable(f"bundle service answered HTTP {resp.status_code}")
                    raw = b""
                    for chunk in resp.iter_content(65_536):
                        raw += chunk
                        if len(raw) > self._max_bytes:
                            raise BundleUnavailable(f"bundle larger than {self._max_bytes} bytes")
                    etag = resp.headers.get("ETag")
            except requests.RequestException as exc:
                raise BundleUnavailable(f"bundle service unreachable: {type(exc).__name__}") from None
        self._etag = etag
        return read_tarball(raw, source=self._url)
