"""Evaluating recorded decide calls again, offline: the policy of a directory, a bundle file, a
bundle URL or the revision archive, loaded into one embedded OPA engine, asked the decision
document for a record's policy input (``AuditRecord.evaluated_input``). What ``toolgate policy
diff`` and ``toolgate policy explain`` share.

Nothing here decides a live call: a result is a ``PolicyDecision`` parsed strictly
(``app.engine.base.parse_decision``) or a ``Reevaluation`` error; no metric is counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.audit.records import AuditRecord
from app.engine.base import InvalidPolicyResult, parse_decision
from app.engine.sources import BundleUnavailable, BundleUrlSource
from app.models import PolicyDecision
from app.policy.bundle import MAX_BUNDLE_BYTES, PolicyBundle, PolicyLoadError, load_into, read_directory, read_tarball

#: The events whose records are decide calls a policy evaluated.
DECIDE_EVENTS = ("decide", "decide_dry_run")


class ReevaluationFailed(Exception):
    """The policy gave no decision for a recorded input: an evaluation error, an undefined
    document, a result that is not a decision. The message says which."""


def read_policy(where: str, *, timeout_s: float = 10.0, tenant_data_dir: Path | None = None) -> PolicyBundle:
    """The policy at ``where``: a policy directory (with the pushed tenant data of
    ``tenant_data_dir`` over it), a bundle tarball, or an http(s) bundle URL. Raises
    ``PolicyLoadError`` (unreadable, missing, unreachable, tenant data for a bundle)."""
    if tenant_data_dir is not None and not Path(where).is_dir():
        raise PolicyLoadError(f"{where}: tenant data can be laid over a policy directory only")
    if where.startswith(("http://", "https://")):
        try:
            bundle = BundleUrlSource(where, timeout_s=timeout_s, max_bytes=MAX_BUNDLE_BYTES).fetch()
        except BundleUnavailable as exc:
            raise PolicyLoadError(f"{where}: {exc}") from None
        if bundle is None:  # a first fetch has no ETag to match
            raise PolicyLoadError(f"{where}: the bundle service answered 304 to a first request")
        return bundle
    path = Path(where)
    if path.is_dir():
        return read_directory(path, tenant_data_dir=tenant_data_dir)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PolicyLoadError(f"{where}: cannot read: {exc.strerror}") from None
    return read_tarball(raw, source=where)


@dataclass(frozen=True)
class RecordedCall:
    """Whether a decide record can be evaluated again: its ``policy_input`` (the document its
    policy saw) and ``decision`` (its policy's own decision), or why not (``cannot_judge``:
    ``redacted`` when the record does not keep some values of the input; ``no_policy_input``
    when it keeps none: written before records kept one, a presented approval refused without
    asking the policy, or an input without an RFC 8785 form)."""

    record: AuditRecord
    policy_input: dict[str, Any] | None
    decision: str | None
    cannot_judge: str | None


def recorded_call(record: AuditRecord) -> RecordedCall | None:
    """The ``RecordedCall`` of a decide record that has a decision, None for any other record
    (another event, a call that failed, a presented approval refused without asking the
    policy)."""
    if record.event not in DECIDE_EVENTS or record.decision is None:
        return None
    evaluated = record.evaluated_input()
    decision = record.policy_decision or record.decision
    if evaluated is None:
        return RecordedCall(record, None, decision, "no_policy_input")
    if record.policy_input_redacted:
        return RecordedCall(record, evaluated, decision, "redacted")
    return RecordedCall(record, evaluated, decision, None)


class BundleEvaluator:
    """One bundle in one embedded OPA engine, asked ``decision_path`` (``toolgate/decision``).
    Raises ``PolicyLoadError`` when the bundle does not load. Not thread-safe; ``close()`` it."""

    def __init__(self, bundle: PolicyBundle, decision_path: str = "toolgate/decision") -> None:
        from opa_bindings import OpaEngine

        self.bundle = bundle
        self._document = decision_path.replace("/", ".")
        self._engine = OpaEngine()
        try:
            load_into(self._engine, bundle)
        except PolicyLoadError:
            self._engine.close()
            raise

    @property
    def revision(self) -> str:
        return self.bundle.revision

    def evaluate(self, policy_input: dict[str, Any]) -> PolicyDecision:
        """The decision for ``policy_input``. Raises ``ReevaluationFailed``."""
        from opa_bindings import OpaError, OpaUndefinedError

        try:
            value = self._engine.eval_document(self._document, policy_input)
        except OpaUndefinedError:
            raise ReevaluationFailed("the decision document is undefined") from None
        except OpaError as exc:
            raise ReevaluationFailed(f"evaluation error: {exc.code}: {exc.message}") from None
        try:
            return parse_decision(value, self.bundle.revision)
        except InvalidPolicyResult as exc:
            raise ReevaluationFailed(f"not a decision: {exc}") from None

    def close(self) -> None:
        self._engine.close()
