"""The pinned policy toolchain: versions from ``tools/versions.env`` (also read by
scripts/install-opa.sh, which builds them into ``.tools/bin``) and where the binaries are.

An ``opa`` binary is the project's ``.tools/bin/opa`` when it is there, else one on ``PATH``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from app.settings import PROJECT_ROOT

VERSIONS_FILE = PROJECT_ROOT / "tools" / "versions.env"
TOOLS_BIN = PROJECT_ROOT / ".tools" / "bin"


def pinned_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    """``KEY=value`` lines of the versions file (comments and blank lines skipped)."""
    versions: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            versions[key.strip()] = value.strip()
    return versions


def _binary(name: str) -> Path | None:
    local = TOOLS_BIN / name
    if local.is_file() and local.stat().st_mode & 0o111:
        return local
    found = shutil.which(name)
    return Path(found) if found else None


def opa_binary() -> Path | None:
    """The ``opa`` to run, or None when there is none."""
    return _binary("opa")


def regal_binary() -> Path | None:
    """The ``regal`` to run, or None when there is none."""
    return _binary("regal")
