"""Execution reports (DESIGN §4): the tool service tells the gateway how a reserved call ended.

``report_complete`` validates the result against the contract of the reserved tool and stores
it (and returns what the session learns from it, docs/session.md); ``report_failure``
releases the key or stores the failure. Both act only on a record the same tenant and
subject reserved, compare-and-set on the owner token when one is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.contracts.contract import ToolContract
from app.contracts.registry import ContractRegistry
from app.errors import NotFound, ValidationFailed
from app.idempotency.keys import Scope, validate_key
from app.idempotency.store import IdempotencyStore, Report
from app.models import CompleteReport, FailReport, Subject


def _scope(subject: Subject, key: str) -> Scope:
    """The record ``subject`` holds under ``key``; a key that is not 1-255 printable ASCII can
    have no record: ``NotFound`` (404), without asking Redis."""
    try:
        return Scope(subject.tenant, subject.id, validate_key(key))
    except ValidationFailed:
        raise NotFound("no execution with this key") from None


@dataclass(frozen=True)
class Completed:
    """A stored completion and what the session learns from it: the reserved tool's contract
    (None: unregistered) and the validated result."""

    report: Report
    contract: ToolContract | None
    result: Any


def report_complete(
    store: IdempotencyStore, contracts: ContractRegistry, subject: Subject, key: str, report: CompleteReport
) -> Completed:
    """Store ``report.result`` for the call ``subject`` reserved under ``key``.

    Raises ``ValidationFailed`` (422: the result does not match the contract's output
    schema), ``NotFound`` (404: no such record for this tenant and subject, or a malformed key),
    ``Conflict`` (409: not the caller's reservation any more, or already settled otherwise),
    ``DependencyUnavailable`` (503).
    """
    scope = _scope(subject, key)
    tool, version = store.reserved_tool(scope, subject.id)
    namespace, _, name = tool.rpartition("/")  # the record holds the qualified name
    contract = contracts.get(name, version, namespace)
    result = contract.validate_output(report.result) if contract else report.result
    return Completed(store.complete(scope, subject.id, result, token=report.reservation_token), contract, result)


def report_failure(store: IdempotencyStore, subject: Subject, key: str, report: FailReport) -> Report:
    """Record that the call ``subject`` reserved under ``key`` failed: ``report.retryable``
    releases the key, otherwise the failure and ``report.reason`` are replayed to retries.

    Raises ``NotFound`` (404), ``Conflict`` (409), ``DependencyUnavailable`` (503), as
    ``report_complete``.
    """
    scope = _scope(subject, key)
    return store.fail(
        scope, subject.id, retryable=report.retryable, reason=report.reason, token=report.reservation_token
    )
