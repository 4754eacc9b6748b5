"""Tenant data pushed by operators (``PUT /v1/policy/tenants/<tenant>/data``): validation, and
the overlay directory it is stored in.

The policy reads each tenant's data at ``data.tenants[<tenant>]``. Two places give it: the
policy directory's own ``tenants/<tenant>/data.json`` files, and this overlay directory,
``<tenant_data_dir>/<tenant>/data.json``, which ``app.policy.bundle.read_directory`` lays over
the policy directory at ``tenants/<tenant>/data.json`` (a pushed tenant's file replaces the
policy directory's file of that tenant, whole). The bundle's content hash covers the overlay, so
a push changes the policy revision, and every engine that polls the directory (or the bundle
``toolgate policy serve-bundle`` builds of it) reloads it without a restart.

The documented keys (docs/policy-authors.md "Tenant data") are the only ones accepted:
``counterparties.<kind>`` (lists of identifiers; ``contacts``: e-mail addresses),
``allowed_domains`` (domains), ``limits.<name>`` (numbers), ``features.<name>`` (booleans), and
``custom.<name>``: a member whose shape the policy declares (a family's or the library's
``tenant_custom := {<name>: <JSON Schema>}``, collected in ``data.toolgate.catalog.tenant_custom``).
``validate`` checks custom members against those shapes when given them, and then refuses a
member nobody declares.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker, ValidationError

DATA_FILE = "data.json"
#: A tenant that can have data: its id is a folder name and a Rego data key.
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"
_TENANT = re.compile(TENANT_PATTERN)
_NAME = r"^[a-z][a-z0-9_]{0,63}$"
_STRINGS = {"type": "array", "maxItems": 10_000, "items": {"type": "string", "minLength": 1, "maxLength": 320}}

#: The JSON Schema of one tenant's data (the documented keys only).
TENANT_DATA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "counterparties": {
            "type": "object",
            "propertyNames": {"pattern": _NAME},
            "additionalProperties": _STRINGS,
        },
        "allowed_domains": _STRINGS,
        "limits": {
            "type": "object",
            "propertyNames": {"pattern": _NAME},
            "additionalProperties": {"type": "number", "minimum": 0},
        },
        "features": {
            "type": "object",
            "propertyNames": {"pattern": _NAME},
            "additionalProperties": {"type": "boolean"},
        },
        "custom": {"type": "object", "propertyNames": {"pattern": _NAME}},
    },
}
_VALIDATOR = Draft202012Validator(TENANT_DATA_SCHEMA)
#: The document the custom members' shapes are read from (``custom_shapes``).
CUSTOM_SHAPES_DOCUMENT = "toolgate.catalog.tenant_custom"
#: Constructs Python's ``re`` accepts and RE2 (the policy's regex engine) does not: lookaround,
#: atomic groups, backreferences. A shape's ``"format": "regex"`` refuses these too.
_NOT_RE2 = re.compile(r"\(\?<?[=!>]|\\[1-9]")
_FORMATS = FormatChecker()


@_FORMATS.checks("regex", raises=re.error)
def _is_re2_regex(value: object) -> bool:
    if not isinstance(value, str):
        return True
    re.compile(value)
    return _NOT_RE2.search(value) is None


class TenantDataInvalid(ValueError):
    """The pushed document is not valid tenant data; ``problems`` lists each problem as
    ``{"path": <JSON Pointer>, "message": ...}`` (safe to return: it quotes no values)."""

    def __init__(self, problems: list[dict[str, str]]) -> None:
        super().__init__("; ".join(f"{p['path']}: {p['message']}" for p in problems))
        self.problems = problems


def is_tenant_with_data(tenant: str) -> bool:
    """True when ``tenant`` can have data (``TENANT_PATTERN``)."""
    return bool(_TENANT.fullmatch(tenant))


def validate(document: Any, custom_shapes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``document`` when it is valid tenant data (``TENANT_DATA_SCHEMA``), each ``custom``
    member matching its shape in ``custom_shapes`` (``{name: JSON Schema}``, see
    ``custom_shapes``; None: custom members are not checked beyond their names); raises
    ``TenantDataInvalid`` with at most 20 problems otherwise."""
    problems = [_problem(error) for error in sorted(_VALIDATOR.iter_errors(document), key=_where)]
    if not problems and custom_shapes is not None:
        for name, value in sorted(document.get("custom", {}).items()):
            if name not in custom_shapes:
                problems.append({"path": f"/custom/{name}", "message": "no family declares this custom member (tenant_custom)"})
                continue
            validator = Draft202012Validator(custom_shapes[name], format_checker=_FORMATS)
            problems.extend(_problem(error, f"/custom/{name}") for error in sorted(validator.iter_errors(value), key=_where))
    if problems:
        raise TenantDataInvalid(problems[:20])
    return dict(document)


def custom_shapes(catalog_entry: Any) -> dict[str, Any]:
    """``{name: JSON Schema}`` of ``data.toolgate.catalog.tenant_custom`` (``{name: {"schema",
    "declared_by"}}``; undefined or malformed: no custom member is declared)."""
    if not isinstance(catalog_entry, dict):
        return {}
    return {
        name: entry["schema"] for name, entry in catalog_entry.items()
        if isinstance(entry, dict) and isinstance(entry.get("schema"), dict)
    }


def _where(error: ValidationError) -> list[str]:
    return [str(part) for part in error.absolute_path]


def _problem(error: ValidationError, prefix: str = "") -> dict[str, str]:
    pointer = prefix + "".join(f"/{part}" for part in error.absolute_path)
    return {"path": pointer or "/", "message": _safe_message(error.validator, error.validator_value)}


def _safe_message(keyword: Any, expected: Any) -> str:
    """The problem without the offending value (tenant data may be sensitive)."""
    if keyword == "additionalProperties" and expected is False:
        return "unknown key (allowed: counterparties, allowed_domains, limits, features, custom)"
    if keyword == "type":
        return f"must be of type {expected}"
    if keyword == "propertyNames":
        return "a key must be a lower-case name (a-z, 0-9, _)"
    if keyword == "format" and expected == "regex":
        return "not a regular expression RE2 accepts (no lookaround, atomic group or backreference)"
    return f"fails {keyword} {json.dumps(expected)}"


def canonical_bytes(document: dict[str, Any]) -> bytes:
    """The stored form: sorted keys, two-space indent, a final newline."""
    return (json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def digest(raw: bytes) -> str:
    """``sha256:<64 hex>`` of stored bytes (the data's version, an ETag)."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True)
class StoredData:
    """One tenant's data as stored: ``raw`` bytes, ``source`` (``pushed``: the overlay
    directory; ``policy_dir``: the policy directory's own file)."""

    raw: bytes
    source: str

    @property
    def document(self) -> Any:
        return json.loads(self.raw)

    @property
    def version(self) -> str:
        return digest(self.raw)


class TenantDataStore:
    """The overlay directory: ``<root>/<tenant>/data.json`` per pushed tenant. Writes are atomic
    (a temporary file renamed over the old one), so a reader sees the old or the new file."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, tenant: str) -> Path:
        if not is_tenant_with_data(tenant):
            raise ValueError(f"tenant id {tenant!r} cannot have data")
        return self.root / tenant / DATA_FILE

    @contextmanager
    def locked(self, tenant: str) -> Iterator[None]:
        """Hold ``tenant``'s lock (``flock`` on ``<root>/<tenant>/.lock``, across processes on
        this machine) for a read-compare-write. Raises ``OSError``."""
        folder = self._path(tenant).parent
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / ".lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def read(self, tenant: str) -> bytes | None:
        """The pushed bytes of ``tenant``, or None when it has none. Raises ``OSError``."""
        try:
            return self._path(tenant).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, tenant: str, raw: bytes | None) -> None:
        """Store ``raw`` as ``tenant``'s data (None removes it). Raises ``OSError``."""
        path = self._path(tenant)
        if raw is None:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".data-", suffix=".json", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(raw)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def overlay_files(root: Path | None) -> dict[str, bytes]:
    """The overlay as bundle files: ``{"tenants/<tenant>/data.json": bytes}`` for every tenant
    folder of ``root`` with a ``data.json`` (hidden entries and names outside
    ``TENANT_PATTERN`` are skipped); ``{}`` for None or a missing folder. Raises ``OSError``."""
    if root is None or not Path(root).is_dir():
        return {}
    found: dict[str, bytes] = {}
    for folder in sorted(Path(root).iterdir()):
        path = folder / DATA_FILE
        if folder.is_dir() and is_tenant_with_data(folder.name) and path.is_file():
            found[f"tenants/{folder.name}/{DATA_FILE}"] = path.read_bytes()
    return found
