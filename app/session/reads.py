"""Which session facts a call's policy reads (docs/session.md "Facts on demand").

Each policy family declares, next to ``governs``, the members of the policy input built from
the session that its rules read, as paths from ``input``::

    session_reads := {"session.conversation.trusted_counterparties", "history"}

(``toolgate policy check --strict`` verifies the declaration against the family's Rego, the
library functions it calls included). The policy's ``data.toolgate.session_reads`` document
answers, for ``input.tool``, the union of the declarations of every family that declares the
tool, ``"*"`` for a family without a declaration. The gateway asks it once per tool and
policy revision and builds only those members: a tool whose families read none costs no
session read at all.

Whenever the answer is in doubt the gateway builds everything (``EVERYTHING``): an engine or
policy without the document, an answer that is not a list of strings, an engine error, a
decision made by a policy revision other than the one that answered (a reload in between;
``SessionReads.stale``), and a revision whose declarations the gateway has not verified against
its Rego (``app.session.declarations``: not yet, not possible, or found short). A member a rule reads but the gateway did not build would be
silently undefined, so the gateway never builds less than the policy may read.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from app.engine.base import PolicyEngine, RawResult
from app.errors import ToolgateError
from app.session.declarations import DeclarationsAudit

log = logging.getLogger(__name__)

#: The document that answers which members the families of ``input.tool`` read.
READS_DOCUMENT = "toolgate/session_reads"
#: Distinct tools remembered per policy revision (tool names of unregistered tools are caller
#: input: the memory is bounded, and forgetting only costs one more question).
_MAX_TOOLS = 1024


@dataclass(frozen=True)
class Reads:
    """The input members (paths from ``input``: ``session.subject.calls``, ``history``) that the
    policy of one call may read, answered by policy ``revision`` (None: not asked, e.g. a
    shadow candidate may read anything). ``"*"`` stands for every member."""

    members: frozenset[str]
    revision: str | None = None

    def wants(self, path: str) -> bool:
        """Whether the member at ``path`` (or anything under or above it) may be read."""
        return any(
            member == "*" or member == path or member.startswith(path + ".") or path.startswith(member + ".")
            for member in self.members
        )

    @property
    def any_session(self) -> bool:
        """Whether any member built from the session may be read."""
        return self.wants("session") or self.wants("history")

    def stale(self, policy_revision: str | None) -> bool:
        """Whether a decision of ``policy_revision`` was made by a policy other than the one
        that declared these reads (it may read members that were not built)."""
        if "*" in self.members or self.revision is None:
            return False
        return policy_revision != self.revision


EVERYTHING = Reads(frozenset({"*"}))


def _members(value: Any) -> frozenset[str] | None:
    """The answer as members, None when it is not a list of strings."""
    if isinstance(value, list) and all(isinstance(member, str) for member in value):
        return frozenset(value)
    return None


class SessionReads:
    """The reads of each tool, asked of ``engine`` once per tool and policy revision, trusted
    only for a revision that ``audit`` verified (None: trusted as answered, for tests of the
    answers themselves)."""

    def __init__(self, engine: PolicyEngine, audit: DeclarationsAudit | None = None) -> None:
        self._engine = engine
        self._audit = audit
        self._lock = threading.Lock()
        self._revision: str | None = None
        self._known: dict[tuple[str, str, str], Reads] = {}

    def of_tool(self, tool: dict[str, Any]) -> Reads:
        """The reads of the policy for the tool described by ``tool`` (``input.tool``:
        ``name``, ``version``, ``namespace``); ``EVERYTHING`` when in doubt. Never raises."""
        key = (str(tool.get("name")), str(tool.get("version")), str(tool.get("namespace") or ""))
        try:
            revision = self._engine.revision()
            with self._lock:
                known = self._known.get(key) if revision == self._revision else None
            if known is not None:
                return self._verified(known)
            answer = self._engine.evaluate_document(READS_DOCUMENT, {"tool": tool})
        except ToolgateError as exc:  # the policy cannot answer now; the decision will say so
            log.warning("could not ask which session facts the policy reads; building all",
                        extra={"event": "session_reads_unknown", "code": exc.code})
            return EVERYTHING
        reads = _answered(answer)
        with self._lock:
            if reads.revision != self._revision or len(self._known) >= _MAX_TOOLS:
                self._revision, self._known = reads.revision, {}
            self._known[key] = reads
        return self._verified(reads)

    def prime(self) -> None:
        """Load the policy and wait for the verdict on its declarations (a server's worker, before
        its first call; ``DependencyUnavailable`` when no policy is active is left to the calls)."""
        if self._audit is None:
            return
        try:
            self._audit.trusted(self._engine.revision())
        except ToolgateError:
            return
        self._audit.settle()

    def _verified(self, reads: Reads) -> Reads:
        if self._audit is None or "*" in reads.members or self._audit.trusted(reads.revision):
            return reads
        return EVERYTHING


def _answered(answer: RawResult) -> Reads:
    """The reads ``answer`` names; every member when it is undefined or not a list of strings."""
    members = _members(answer.value) if answer.defined else None
    return Reads(EVERYTHING.members if members is None else members, answer.revision)
