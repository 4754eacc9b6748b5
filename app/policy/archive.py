"""Policy revisions kept by revision (DESIGN §6): what the embedded engines hand over when they
activate a bundle, what ``toolgate policy archive`` adds for bundles an OPA sidecar loads, and
what ``toolgate policy explain`` reads back.

``PolicyArchive.keep(bundle)`` stores the bundle's tarball (``build_tarball``, its signature
kept) under its revision in the decision log's ``policy_revisions`` table, once per revision
and process. ``PolicyArchive.get(revision)`` reads it back; a revision that is a content hash
(``sha256:<16 hex>``, every directory's and every bundle ``toolgate policy build`` wrote
without ``--revision``) must match the content it names, so an archived bundle cannot stand in
for another revision.
"""

from __future__ import annotations

import re
import threading

from app.audit.revisions import RevisionArchive
from app.policy.bundle import PolicyBundle, PolicyLoadError, build_tarball, content_revision, read_tarball

_CONTENT_REVISION = re.compile(r"^sha256:[0-9a-f]{16}$")


class ArchivedBundleInvalid(PolicyLoadError):
    """An archived bundle cannot be read, or its content does not hash to its revision."""


class PolicyArchive:
    """The revision archive over ``store`` (see the module docstring). Thread-safe."""

    def __init__(self, store: RevisionArchive) -> None:
        self._store = store
        self._kept: set[str] = set()
        self._lock = threading.Lock()

    def keep(self, bundle: PolicyBundle) -> bool:
        """Archive ``bundle`` under its revision unless this process did already; True when
        the store did not have it. Raises ``DependencyUnavailable`` when the store fails."""
        with self._lock:
            if bundle.revision in self._kept:
                return False
        new = self._store.keep_revision(
            bundle.revision, build_tarball(bundle, signatures=bundle.signatures), source=bundle.source
        )
        with self._lock:
            self._kept.add(bundle.revision)
        return new

    def get(self, revision: str) -> PolicyBundle | None:
        """The bundle archived as ``revision``, or None. Raises ``ArchivedBundleInvalid``
        when it cannot be read or does not match a content-hash revision, and
        ``DependencyUnavailable`` when the store fails."""
        raw = self._store.archived_bundle(revision)
        if raw is None:
            return None
        try:
            bundle = read_tarball(raw, source=f"the archive of {revision}")
        except PolicyLoadError as exc:
            raise ArchivedBundleInvalid(f"the archived bundle of {revision} cannot be read: {exc}") from None
        if _CONTENT_REVISION.match(revision) and content_revision(bundle.files) != revision:
            raise ArchivedBundleInvalid(f"the archived bundle of {revision} does not hash to its revision (changed)")
        return bundle
