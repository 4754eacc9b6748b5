"""OPA policy bundles: read a policy directory or a bundle tarball, write a tarball, load a
bundle into the embedded OPA engine.

The layout follows OPA bundles (https://www.openpolicyagent.org/docs/management-bundles): every
``**/*.rego`` file is a module (``*_test.rego`` files hold tests and stay out of production
bundles), a ``data.json`` in folder ``a/b`` (relative to the bundle root) is merged at
``data.a.b`` (the one at the root at ``data``), ``.manifest`` holds ``revision``, ``roots`` and
``rego_version``, and ``.signatures.json`` the signature (``app.policy.signing``). Hidden files
and folders of a directory are skipped (its ``.manifest`` is read for ``roots``).

Revision: the manifest's ``revision`` when it is a non-empty string, else the content hash
``sha256:<16 hex>`` over the modules' and data files' relative paths and bytes. A directory's
revision is always its content hash, and ``build_tarball`` writes the content hash unless told
otherwise, so one set of files has one revision wherever it is loaded from: a directory in the
embedded engine, the tarball in the embedded engine, the tarball in an OPA server.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from app.policy.tenant_data import DATA_FILE, overlay_files

MANIFEST = ".manifest"
SIGNATURES = ".signatures.json"
TEST_SUFFIX = "_test.rego"
#: Uncompressed size limit of a bundle tarball (OPA's own default is 1 GiB; ours are small).
MAX_BUNDLE_BYTES = 32 * 1024 * 1024
_ERROR_LOCATION = re.compile(r"(?P<file>[^\s:]+\.rego):\d+")


class PolicyLoadError(ValueError):
    """A policy bundle cannot be read or loaded: a missing directory, an unreadable or unsafe
    file, a Rego parse or compile error, invalid or conflicting data, a malformed manifest or
    tarball. ``path`` is the offending file (relative to the bundle root) when it is known."""

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class RegoEngine(Protocol):
    """The part of ``opa_bindings.OpaEngine`` that loading needs."""

    def add_policy(self, name: str, source: str) -> None: ...

    def add_data(self, value: Any, path: str = "") -> None: ...

    def eval_query(self, query: str) -> Any: ...


@dataclass(frozen=True)
class PolicyBundle:
    """One bundle in memory.

    ``files``: every file but ``.signatures.json``, by POSIX path relative to the bundle root
    (no leading slash), raw bytes; the manifest is among them when the bundle has one.
    ``signatures``: the raw ``.signatures.json`` or None. ``source``: where it was read, for
    messages.
    """

    files: Mapping[str, bytes]
    revision: str
    roots: tuple[str, ...] | None = None
    signatures: bytes | None = None
    source: str = ""
    manifest: Mapping[str, Any] = field(default_factory=dict)

    @property
    def modules(self) -> list[str]:
        """Paths of the Rego modules, sorted."""
        return sorted(p for p in self.files if p.endswith(".rego"))

    @property
    def data_files(self) -> list[str]:
        """Paths of the ``data.json`` files, the root one first, then shallowest first."""
        found = [p for p in self.files if PurePosixPath(p).name == DATA_FILE]
        return sorted(found, key=lambda p: (len(PurePosixPath(p).parts), p))


def content_revision(files: Mapping[str, bytes]) -> str:
    """``sha256:<16 hex>`` over the modules' and data files' paths and bytes in path order
    (the manifest and any other file do not count)."""
    digest = hashlib.sha256()
    for rel in sorted(p for p in files if p.endswith(".rego") or PurePosixPath(p).name == DATA_FILE):
        name, data = rel.encode(), files[rel]
        digest.update(len(name).to_bytes(4, "big") + name + len(data).to_bytes(8, "big") + data)
    return "sha256:" + digest.hexdigest()[:16]


def _manifest(raw: bytes, where: str) -> dict[str, Any]:
    try:
        manifest = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PolicyLoadError(f"{where}: .manifest is not JSON: {exc}", Path(MANIFEST)) from None
    if not isinstance(manifest, dict):
        raise PolicyLoadError(f"{where}: .manifest must hold a JSON object", Path(MANIFEST))
    revision = manifest.get("revision")
    if revision is not None and not isinstance(revision, str):
        raise PolicyLoadError(f"{where}: .manifest revision must be a string", Path(MANIFEST))
    roots = manifest.get("roots")
    if roots is not None and not (isinstance(roots, list) and all(isinstance(r, str) for r in roots)):
        raise PolicyLoadError(f"{where}: .manifest roots must be a list of strings", Path(MANIFEST))
    return manifest


def read_directory(
    policy_dir: Path, *, include_tests: bool = False, tenant_data_dir: Path | None = None
) -> PolicyBundle:
    """The bundle of a policy directory: non-hidden ``*.rego`` (``*_test.rego`` only with
    ``include_tests``) and ``data.json`` files, with the pushed tenant data of
    ``tenant_data_dir`` laid over it (``app.policy.tenant_data.overlay_files``: a pushed
    tenant's ``tenants/<tenant>/data.json`` replaces the directory's); ``roots`` from its
    ``.manifest`` if any; the content hash as revision. Raises ``PolicyLoadError`` for a missing
    directory or an unreadable file."""
    policy_dir = Path(policy_dir)
    if not policy_dir.is_dir():
        raise PolicyLoadError(f"policy directory {policy_dir} does not exist")
    files: dict[str, bytes] = {}
    for path in sorted(policy_dir.rglob("*")):
        rel = path.relative_to(policy_dir)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        wanted = (path.suffix == ".rego" and (include_tests or not path.name.endswith(TEST_SUFFIX))) or (
            path.name == DATA_FILE
        )
        if wanted:
            try:
                files[rel.as_posix()] = path.read_bytes()
            except OSError as exc:
                raise PolicyLoadError(f"{rel.as_posix()}: cannot read: {exc.strerror}", rel) from None
    try:
        files.update(overlay_files(tenant_data_dir))
    except OSError as exc:
        raise PolicyLoadError(f"tenant data in {tenant_data_dir}: cannot read: {exc.strerror}") from None
    manifest: dict[str, Any] = {}
    manifest_path = policy_dir / MANIFEST
    if manifest_path.is_file():
        manifest = _manifest(manifest_path.read_bytes(), str(policy_dir))
    roots = manifest.get("roots")
    return PolicyBundle(
        files=files,
        revision=content_revision(files),
        roots=tuple(roots) if roots is not None else None,
        source=str(policy_dir),
        manifest=manifest,
    )


def _member_path(name: str, where: str) -> str:
    rel = PurePosixPath(name.lstrip("/"))
    if rel.parts[:1] == (".",):
        rel = PurePosixPath(*rel.parts[1:])
    if not rel.parts or ".." in rel.parts or rel.is_absolute():
        raise PolicyLoadError(f"{where}: unsafe path {name!r} in the bundle")
    return rel.as_posix()


def read_tarball(raw: bytes, *, source: str) -> PolicyBundle:
    """The bundle in a gzipped tarball (``opa build`` or ``build_tarball`` output).

    Only regular files and folders are accepted (no links, devices, ``..`` or absolute paths),
    at most ``MAX_BUNDLE_BYTES`` uncompressed; ``data.yaml`` is refused (the embedded engine
    reads JSON data only). Raises ``PolicyLoadError``.
    """
    files: dict[str, bytes] = {}
    signatures: bytes | None = None
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tar:
            for member in tar:
                if member.isdir():
                    continue
                if not member.isfile():
                    raise PolicyLoadError(f"{source}: {member.name!r} is not a regular file")
                rel = _member_path(member.name, source)
                total += member.size
                if total > MAX_BUNDLE_BYTES:
                    raise PolicyLoadError(f"{source}: the bundle is larger than {MAX_BUNDLE_BYTES} bytes")
                extracted = tar.extractfile(member)
                data = extracted.read() if extracted else b""
                if PurePosixPath(rel).name in ("data.yaml", "data.yml"):
                    raise PolicyLoadError(f"{source}: {rel}: YAML data files are not supported", Path(rel))
                if rel == SIGNATURES:
                    signatures = data
                elif rel in files:
                    raise PolicyLoadError(f"{source}: {rel} appears twice in the bundle", Path(rel))
                else:
                    files[rel] = data
    except (tarfile.TarError, EOFError, OSError, gzip.BadGzipFile) as exc:
        raise PolicyLoadError(f"{source}: not a gzipped tar bundle: {exc}") from None
    manifest = _manifest(files[MANIFEST], source) if MANIFEST in files else {}
    roots = manifest.get("roots")
    revision = manifest.get("revision") or content_revision(files)
    return PolicyBundle(
        files=files,
        revision=revision,
        roots=tuple(roots) if roots is not None else None,
        signatures=signatures,
        source=source,
        manifest=manifest,
    )


def manifest_bytes(revision: str, roots: tuple[str, ...]) -> bytes:
    """The ``.manifest`` that ``build_tarball`` writes (Rego v1)."""
    return json.dumps({"revision": revision, "roots": list(roots), "rego_version": 1}, sort_keys=True).encode()


def with_manifest(bundle: PolicyBundle, *, revision: str | None = None, roots: tuple[str, ...] | None = None) -> PolicyBundle:
    """``bundle`` with its ``.manifest`` (re)written: ``revision`` (default: the content hash)
    and ``roots`` (default: the bundle's own, else ``[""]``, OPA's "owns every path")."""
    revision = revision or content_revision(bundle.files)
    roots = roots if roots is not None else (bundle.roots if bundle.roots is not None else ("",))
    files = {**bundle.files, MANIFEST: manifest_bytes(revision, roots)}
    return PolicyBundle(files=files, revision=revision, roots=roots, source=bundle.source,
                        manifest=json.loads(files[MANIFEST]))


def build_tarball(bundle: PolicyBundle, *, signatures: bytes | None = None) -> bytes:
    """A gzipped tarball of ``bundle`` (plus ``.signatures.json`` when given). Deterministic:
    sorted paths, a leading ``/`` as ``opa build`` writes them, mtime 0, owner 0, mode 0644, so
    the same files give the same bytes (and the same HTTP ETag)."""
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        entries = sorted(bundle.files.items())
        if signatures is not None:
            entries.append((SIGNATURES, signatures))
        for rel, data in entries:
            info = tarfile.TarInfo("/" + rel)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _text(bundle: PolicyBundle, rel: str) -> str:
    try:
        return bundle.files[rel].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyLoadError(f"{rel}: not UTF-8: {exc}", Path(rel)) from None


def load_into(engine: RegoEngine, bundle: PolicyBundle) -> list[str]:
    """Load ``bundle`` into ``engine`` and check that it compiles.

    Adds every module under its bundle path in sorted order, merges every ``data.json`` at the
    data path of its folder (root first, then shallowest first), then compiles. Returns the
    loaded paths: modules, then data files. Raises ``PolicyLoadError`` naming the file on a Rego
    parse or compile error, invalid JSON, a root ``data.json`` that is not an object, or a data
    merge conflict.
    """
    from opa_bindings import OpaError

    for rel in bundle.modules:
        try:
            engine.add_policy(rel, _text(bundle, rel))
        except OpaError as exc:
            raise PolicyLoadError(f"{rel}: {exc.message}", Path(rel)) from None
    for rel in bundle.data_files:
        try:
            value = json.loads(_text(bundle, rel))
        except json.JSONDecodeError as exc:
            raise PolicyLoadError(f"{rel}: invalid JSON: {exc}", Path(rel)) from None
        data_path = ".".join(PurePosixPath(rel).parent.parts)
        if not data_path and not isinstance(value, dict):
            raise PolicyLoadError(f"{rel}: the root data.json must hold a JSON object", Path(rel))
        try:
            engine.add_data(value, path=data_path)
        except OpaError as exc:
            target = f"data.{data_path}" if data_path else "data"
            raise PolicyLoadError(f"{rel}: cannot merge at {target}: {exc.message}", Path(rel)) from None
    try:
        engine.eval_query("true")  # compiles every module: unsafe vars, type and conflict errors
    except OpaError as exc:
        match = _ERROR_LOCATION.search(exc.message)
        raise PolicyLoadError(
            f"policy bundle {bundle.source} does not compile: {exc.message}", Path(match["file"]) if match else None
        ) from None
    return bundle.modules + bundle.data_files


def load_bundle(engine: RegoEngine, policy_dir: Path, *, include_tests: bool) -> list[Path]:
    """Load the policy directory ``policy_dir`` into ``engine`` (``read_directory`` then
    ``load_into``); returns the loaded files relative to ``policy_dir``. Raises
    ``PolicyLoadError``."""
    return [Path(p) for p in load_into(engine, read_directory(policy_dir, include_tests=include_tests))]
