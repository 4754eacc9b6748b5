"""Whether the running policy revision's ``session_reads`` declarations cover what its rules
read, checked by the gateway itself (docs/session.md "Facts on demand").

``toolgate policy check --strict`` reports a family that reads a session member it does not
declare, but a revision can be activated without it (a hot reload of a policy folder, a bundle
built elsewhere). The gateway would then not build the member, the rule would see it
undefined, and a deny on it would not fire. So the gateway trusts a revision's declarations
only once it has analysed that revision's Rego (``app.policy.session_reads``, the analysis of
``policy check``): until the analysis is done, when it finds a gap, and when it cannot run (no
``opa`` binary to parse with, the modules cannot be read), every call builds the whole session.

The analysis runs in a background thread, once per revision; its verdict is kept per content
(the modules' paths and bytes), so a process that sees the same policy again does not parse it
again. ``settle`` waits for a running analysis (a served worker waits for the first one,
``SessionReads.prime``, so it starts with its verdict).
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from app import metrics
from app.engine.base import PolicyModules

log = logging.getLogger(__name__)

#: Revisions remembered per process (a verdict per revision; old ones are analysed again).
_MAX_REVISIONS = 16
_SETTLE_TIMEOUT_S = 120.0


_gaps_by_content: dict[str, list[str]] = {}
_content_lock = threading.Lock()


class DeclarationsAudit:
    """Answers whether a revision's ``session_reads`` may be trusted.

    ``modules``: the running policy's modules (None when they cannot be had now; raises
    nothing); ``opa``: the binary that parses Rego, or None (nothing can be verified).
    """

    def __init__(self, modules: Callable[[], PolicyModules | None], opa: Path | None) -> None:
        self._modules = modules
        self._opa = opa
        self._lock = threading.Lock()
        self._verdicts: dict[str, bool] = {}
        self._running: threading.Thread | None = None

    def trusted(self, revision: str | None) -> bool:
        """Whether the declarations of ``revision`` were verified to cover its reads; False
        while unknown (the analysis is started then). Never raises, never blocks."""
        if revision is None:
            return False
        with self._lock:
            verdict = self._verdicts.get(revision)
            if verdict is None and self._running is None:
                self._running = threading.Thread(target=self._analyse, name="session-reads-audit")
                self._running.start()
        return verdict is True

    def settle(self, timeout_s: float = _SETTLE_TIMEOUT_S) -> None:
        """Wait (at most ``timeout_s``) for the analysis that is running, if any."""
        with self._lock:
            running = self._running
        if running is not None:
            running.join(timeout_s)

    def _analyse(self) -> None:
        try:
            policy = self._modules()
            if policy is not None:
                verdict = self._verdict(policy)
                with self._lock:
                    if len(self._verdicts) >= _MAX_REVISIONS:
                        self._verdicts.clear()
                    self._verdicts[policy.revision] = verdict
        except Exception:  # the verdict stays unknown: every call builds the whole session
            log.exception("could not check the policy's session_reads declarations",
                          extra={"event": "session_reads_unverified"})
        finally:
            with self._lock:
                self._running = None

    def _verdict(self, policy: PolicyModules) -> bool:
        key = policy.content_key()
        with _content_lock:
            gaps = _gaps_by_content.get(key)
        if gaps is None:
            if self._opa is None:
                log.warning("no opa binary to parse the policy with: the session_reads declarations of revision %s "
                            "cannot be verified, so every call builds the whole session", policy.revision,
                            extra={"event": "session_reads_unverified", "revision": policy.revision})
                return False
            gaps = declaration_gaps(policy, self._opa)
            with _content_lock:
                _gaps_by_content[key] = gaps
        for gap in gaps:
            log.error("policy revision %s: %s; every call builds the whole session under this revision",
                      policy.revision, gap, extra={"event": "session_reads_gap", "revision": policy.revision})
        metrics.SESSION_READS_GAPS.set(len(gaps))
        return not gaps


def declaration_gaps(policy: PolicyModules, opa: Path) -> list[str]:
    """The error findings of ``policy check`` about session reads (undeclared, malformed, read
    outside a family) for ``policy``'s production modules, as messages. Raises
    ``RegoParseError`` when a module cannot be parsed."""
    from app.policy.check import session_read_findings
    from app.policy.rego_ast import RegoModule, parse_module
    from app.policy.session_reads import SessionReadAnalysis

    with tempfile.TemporaryDirectory(prefix="toolgate-reads-") as scratch:
        parsed = []
        for index, path in enumerate(sorted(policy.production_paths())):
            file = Path(scratch) / f"{index}.rego"
            file.write_bytes(policy.modules[path])
            parsed.append(RegoModule(path, parse_module(opa, file).ast))
        findings = session_read_findings(SessionReadAnalysis(parsed))
        return [f.message for f in findings if f.severity == "error"]
