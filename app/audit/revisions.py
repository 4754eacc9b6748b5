"""The revision archive (DESIGN §6): every policy revision a gateway activated, kept by revision
beside the decision log, so that a recorded decision can be evaluated again under the revision
that made it (``toolgate policy explain``) after any number of reloads.

One row per revision in ``policy_revisions`` (schema version 3): the bundle tarball (base64),
when it was first archived and where it was read. Rows are written once (a revision is
immutable: the first writer wins, later ones change nothing) and are not part of the hash
chains; a content-hash revision (``sha256:...``) can be checked against its bundle when read
(``app.policy.archive``).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from abc import ABC, abstractmethod
from dataclasses import dataclass

from app.audit.sql_base import SqlBase
from app.timefmt import epoch_us, from_epoch_us, utc_now


@dataclass(frozen=True)
class ArchivedRevision:
    """One archived revision: its name, when it was first archived, where it was read."""

    revision: str
    archived_at: dt.datetime
    source: str


class RevisionArchive(ABC):
    """Keep and read bundles by revision. Raises ``DependencyUnavailable`` when the store fails."""

    @abstractmethod
    def keep_revision(self, revision: str, tarball: bytes, *, source: str) -> bool:
        """Archive ``tarball`` as ``revision`` unless it is archived already; True when new."""

    @abstractmethod
    def archived_bundle(self, revision: str) -> bytes | None:
        """The tarball archived as ``revision``, or None."""

    @abstractmethod
    def archived_revisions(self) -> list[ArchivedRevision]:
        """Every archived revision, oldest first."""


class SqlRevisionArchive(SqlBase, RevisionArchive):
    """``RevisionArchive`` over the decision log's database (see the module docstring)."""

    def keep_revision(self, revision: str, tarball: bytes, *, source: str) -> bool:
        self.ensure_schema()
        with self._write() as cur:
            cur.execute(
                self._sql(
                    "INSERT INTO policy_revisions (revision, archived_us, source, bundle) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (revision) DO NOTHING"
                ),
                (revision, epoch_us(utc_now()), source[:1000], base64.b64encode(tarball).decode("ascii")),
            )
            return bool(cur.rowcount)

    def archived_bundle(self, revision: str) -> bytes | None:
        self.ensure_schema()
        with self._read() as cur:
            cur.execute(self._sql("SELECT bundle FROM policy_revisions WHERE revision = ?"), (revision,))
            row = cur.fetchone()
        if row is None:
            return None
        try:
            return base64.b64decode(row[0], validate=True)
        except (binascii.Error, ValueError):
            return b""  # a damaged row reads as an unreadable bundle, never as another one

    def archived_revisions(self) -> list[ArchivedRevision]:
        self.ensure_schema()
        with self._read() as cur:
            cur.execute("SELECT revision, archived_us, source FROM policy_revisions ORDER BY archived_us, revision")
            rows = cur.fetchall()
        return [ArchivedRevision(row[0], from_epoch_us(row[1]), row[2]) for row in rows]
