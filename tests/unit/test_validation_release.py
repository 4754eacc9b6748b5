"""A rejected input leaves nothing behind (app.bodies.release_validation_error).

pydantic-core keeps the exception a custom validator raised, with its traceback, where the
cycle collector cannot see it; a cycle through that traceback (the caller keeps the error in
a local, as the decide pipeline does to record it) was never freed, so every 422 leaked the
frames of its request (found by the benchmark's RSS check: +16 MiB per 50k decisions).
"""

from __future__ import annotations

import gc
import weakref

from app.contracts.registry import ContractRegistry
from app.errors import ValidationFailed
from tests.conftest import CONTRACTS_DIR


class _Request:
    """Stands for the per-request objects the frames of a failed call hold."""


def _fail_and_keep_error(validate) -> weakref.ref:
    request = _Request()
    error = None
    try:
        validate()
    except ValidationFailed as exc:
        error = exc  # the pipeline keeps the error like this, to record it
    assert error is not None
    return weakref.ref(request)


def test_a_rejected_contract_input_is_freed():
    contract = ContractRegistry.load(CONTRACTS_DIR).get("exportReport", "1")
    bad = {"start_date": "2026-03-31", "end_date": "2026-01-01"}  # the model validator raises
    refs = [_fail_and_keep_error(lambda: contract.validate_input(bad)) for _ in range(20)]
    gc.collect()
    assert all(ref() is None for ref in refs)
