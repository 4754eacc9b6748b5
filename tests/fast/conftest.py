"""The socket-free tier: every test here runs with sockets disabled (pytest-socket), over the
in-memory stand-ins of ``tests/support/fakes.py``; the whole tier runs in seconds:

    .venv/bin/pytest tests/fast
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.decide.deps import Deps
from app.settings import Settings
from tests.support import fakes


@pytest.fixture(autouse=True)
def _no_sockets(socket_disabled: None) -> Iterator[None]:
    yield


@pytest.fixture
def config(tmp_path: Path) -> Settings:
    return fakes.settings(tmp_path)


@pytest.fixture
def engine() -> fakes.ScriptedEngine:
    return fakes.ScriptedEngine()


@pytest.fixture
def deps(config: Settings, engine: fakes.ScriptedEngine) -> Iterator[Deps]:
    built = fakes.deps(config, engine)
    yield built
    built.decision_log.close()
