"""What this build of toolgate is: its version, as the installed distribution says."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as distribution_version


def version() -> str:
    """The installed distribution's version (pyproject.toml), or ``unknown`` in a source tree
    that was never installed."""
    try:
        return distribution_version("toolgate")
    except PackageNotFoundError:
        return "unknown"
