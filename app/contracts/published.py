"""The published tool contracts as sets to compare (``app.contracts.compatibility``): from the
registry in force, a folder or a file of contracts, a lock file, or a git revision.

The **lock** (``contracts.lock.json`` at the repository root) is the checked-in record of the
contracts as published, ``{"version": 1, "contracts": [<ToolContract.describe()>, ...]}``
sorted by namespace, name and version, built-in (pydantic) contracts included. CI compares the
registry with it (``toolgate contracts check``); a developer rewrites it on purpose
(``toolgate contracts lock``), so an accepted breaking change shows in review.

A **git revision** (``REV`` or ``REV:PATH``, PATH default ``contracts``) reads the contract
files under PATH at REV (``git ls-tree``, ``git show``); a lock file at ``REV:PATH`` is read as
a lock. Built-in contracts live in code, so a revision's files alone do not hold them: compare
with a lock to cover them.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from app.contracts.compatibility import Published, key_of
from app.contracts.contract import ContractLoadError
from app.contracts.registry import ContractRegistry, read_contract_file

LOCK_VERSION = 1
CONTRACT_SUFFIXES = (".yaml", ".yml", ".json")


class ContractSourceError(ValueError):
    """A set of contracts cannot be read: no such file, folder or revision, a malformed lock,
    an invalid contract. The message says which."""


def from_registry(registry: ContractRegistry) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every contract of ``registry`` as published."""
    return {key_of(c.describe()): c.describe() for c in registry.all()}


def lock_document(contracts: Published) -> dict[str, Any]:
    """The lock file's document for ``contracts``."""
    return {"version": LOCK_VERSION, "contracts": [contracts[key] for key in sorted(contracts)]}


def write_lock(path: Path, contracts: Published) -> None:
    """Write the lock of ``contracts`` to ``path`` (stable: sorted, two-space indented)."""
    path.write_text(json.dumps(lock_document(contracts), indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _is_lock(document: Any) -> bool:
    return isinstance(document, dict) and "contracts" in document and "name" not in document


def parse_lock(document: Any, where: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The contracts of a lock document. Raises ``ContractSourceError``."""
    if not _is_lock(document) or document.get("version") != LOCK_VERSION or not isinstance(document["contracts"], list):
        raise ContractSourceError(f"{where}: not a contracts lock of version {LOCK_VERSION}")
    out = {}
    for entry in document["contracts"]:
        if not isinstance(entry, dict) or not {"name", "version"} <= set(entry):
            raise ContractSourceError(f"{where}: a lock entry without name and version")
        out[key_of(entry)] = entry
    return out


def _from_files(root: Path, where: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    try:
        if root.is_file():
            return {key_of(c.describe()): c.describe() for c in [read_contract_file(root)]}
        return from_registry(ContractRegistry.load(root, include_builtin=False))
    except ContractLoadError as exc:
        raise ContractSourceError(f"{where}: {exc}") from None


def _git(repo: Path, *args: str) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ContractSourceError(f"git could not run: {exc}") from None
    if done.returncode != 0:
        raise ContractSourceError(f"git {' '.join(args)}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def _from_git(spec: str, repo: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    revision, _, path = spec.partition(":")
    path = path or "contracts"
    _git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    names = [n for n in _git(repo, "ls-tree", "-r", "--name-only", revision, "--", path).decode().splitlines() if n]
    if not names:
        raise ContractSourceError(f"{spec}: no such path at that revision")
    if names == [path] and path.endswith(".json"):
        document = json.loads(_git(repo, "show", f"{revision}:{path}"))
        if _is_lock(document):
            return parse_lock(document, spec)
    with tempfile.TemporaryDirectory(prefix="toolgate-contracts-") as scratch:
        for name in names:
            if PurePosixPath(name).suffix in CONTRACT_SUFFIXES:
                target = Path(scratch) / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(_git(repo, "show", f"{revision}:{name}"))
        return _from_files(Path(scratch) / path, spec)


def load(spec: str, *, repo: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The contracts ``spec`` names: a lock file, a contract file, a folder of contract files
    (without the built-in ones), else a git revision of ``repo``. Raises ``ContractSourceError``."""
    path = Path(spec)
    if path.is_file() and path.suffix == ".json":
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ContractSourceError(f"{spec}: {exc}") from None
        if _is_lock(document):
            return parse_lock(document, spec)
    if path.exists():
        return _from_files(path, spec)
    return _from_git(spec, repo)
