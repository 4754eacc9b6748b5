"""No token is minted while pytest imports and collects the tests.

A token minted then (a module constant, a ``parametrize`` argument) is older than the test that
sends it by however long the collection and the tests before it took, and expires under a slow
parallel run: the test then fails with 401 instead of the status it checks. While pytest
collects, minting raises ``EarlyToken``; fixtures and test bodies mint freely.

Guarded: ``jwt.encode`` (``mint_dev_token`` and every PyJWT token of the tests) and
``tests.support.keys.raw_jwt`` (every hand-built token). Loaded by tests/conftest.py
(``pytest_plugins``), before any test module is imported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jwt
import pytest

from tests.support import keys

_collecting = True


class EarlyToken(RuntimeError):
    """A token was minted at import or collection time."""


def _guarded(mint: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(mint)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if _collecting:
            raise EarlyToken(f"{mint.__module__}.{mint.__qualname__} was called while pytest collects the tests: "
                             "mint tokens in a fixture or in the test body, never at import or in parametrize")
        return mint(*args, **kwargs)

    return guarded


jwt.encode = _guarded(jwt.encode)
keys.raw_jwt = _guarded(keys.raw_jwt)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    global _collecting
    _collecting = False
