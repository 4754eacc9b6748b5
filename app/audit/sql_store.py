"""``SqlDecisionStore``: the writer and the reader over one DB-API database; each dialect
(``app.audit.dialects``) subclasses it with its connections."""

from __future__ import annotations

from app.audit.interfaces import DecisionStore
from app.audit.revisions import SqlRevisionArchive
from app.audit.sql_reader import SqlReader
from app.audit.sql_writer import SqlWriter


class SqlDecisionStore(SqlWriter, SqlReader, SqlRevisionArchive, DecisionStore):
    """``DecisionLog``, ``DecisionLogReader`` and the ``RevisionArchive`` over a DB-API database."""
