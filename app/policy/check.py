"""``toolgate policy check``: the policy families against the tool contracts.

Errors (the check fails):

- ``no_family``: a contract of the contracts folder that no family's ``governs`` declares (the
  library denies every call of it, ``toolgate.no_family``); a built-in contract without a family
  is no finding (a suite that does not use it wants its calls denied);
- ``unshared_claim``: two families claim one tool (name, namespace, overlapping versions)
  without naming each other in ``shared_with`` (the library denies it, ``toolgate.family_conflict``);
- ``no_contract``: a family declares a tool, or a version of one, that has no contract in that
  namespace (its rules can never run);
- the catalog's other findings: ``malformed_declaration``, ``malformed_approver_roles``,
  ``shared_with_not_claimant``;
- ``test_named_rule``: a family rule whose last name starts with ``test_`` (``governs.test_x``
  for a tool named ``test_x``), which ``opa test`` runs as a test and fails; declare such tools
  in one object, ``governs := {"test_x": {...}}``.

- ``undeclared_session_read``, ``malformed_session_reads``, ``session_read_outside_family``:
  a family's ``session_reads`` does not cover what its rules read, or is not a literal set of
  strings, or another package reads the session (``app.policy.session_reads``).

Warnings (fail only with ``strict``), from the AST of each family module and of each helper
package the families import (rule code shared by families, e.g. ``policies/shared/<name>/``,
package ``shared.<name>``; ``app.policy.rego_ast``; ``no_session_reads`` and
``unread_session_reads`` from ``app.policy.session_reads``):

- ``undefined_field``: a rule reads ``input.call.input.<field>`` that the contract of a tool it
  applies to does not define (a rule limited to tools: each of them; any other rule: none of the
  family's tools; a helper's rule: none of the tools of the families importing it);
- ``optional_without_default``: a rule reads, without a default, a field that a contract
  defines but does not always hold (not ``required``, and not filled with a default): when the
  field is absent the rule is undefined and silently does not fire. Read it with
  ``object.get(lib.args, "<field>", <default>)``;
- ``sensitive_in_message``: a rule's ``sprintf`` quotes a field (or an object holding one) that
  the contract of a tool it applies to marks sensitive (``sensitive_paths``): rule messages are
  reasons, shown in responses, signed in receipts and kept in the decision log unredacted.

The families come from ``data.toolgate.catalog`` evaluated by the embedded engine on the policy
directory (tests left out), the contracts from ``ContractRegistry.load`` (the built-in ones
included). Paths in findings are the policy directory or contract source joined with the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from app.contracts.builtin import BUILTIN_CONTRACTS
from app.contracts.contract import ContractLoadError, ToolContract
from app.contracts.registry import ContractRegistry
from app.policy.bundle import PolicyLoadError, read_directory
from app.policy.rego_ast import FieldRead, QuotedRead, RegoModule, parse_module
from app.policy.session_reads import SessionReadAnalysis, covers

Severity = Literal["error", "warning"]
_FAMILY_ROOT = "tools"
_YAML_NAME = re.compile(r"^name\s*:")


@dataclass(frozen=True)
class Finding:
    """One problem: ``severity``, a stable ``kind``, a sentence, and where (``file`` and
    ``line`` when known)."""

    severity: Severity
    kind: str
    message: str
    file: str | None = None
    line: int | None = None

    def format(self) -> str:
        """``file:line: severity: message`` (``file:`` or nothing when not known)."""
        where = f"{self.file}:{self.line}: " if self.file and self.line else f"{self.file}: " if self.file else ""
        return f"{where}{self.severity}: {self.message}"


@dataclass
class CheckReport:
    """The findings of one check, errors first, then by file and line."""

    findings: list[Finding] = field(default_factory=list)
    contracts: int = 0
    families: int = 0

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def ok(self, *, strict: bool = False) -> bool:
        """No error (and, ``strict``, no warning)."""
        return not self.errors and not (strict and self.warnings)

    def format_text(self) -> str:
        """One line per finding, then ``policy check: N errors, M warnings (C contracts, F families)``."""
        lines = [f.format() for f in self.findings]
        lines.append(
            f"policy check: {_count(len(self.errors), 'error')}, {_count(len(self.warnings), 'warning')} "
            f"({_count(self.contracts, 'contract')}, {_count(self.families, 'family', 'families')})"
        )
        return "\n".join(lines)

    def to_json(self, *, strict: bool = False) -> str:
        """``{"ok", "strict", "errors", "warnings", "contracts", "families", "findings": [...]}``."""
        return json.dumps({
            "ok": self.ok(strict=strict), "strict": strict, "errors": len(self.errors), "warnings": len(self.warnings),
            "contracts": self.contracts, "families": self.families,
            "findings": [asdict(f) for f in self.findings],
        }, indent=2)


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


@dataclass(frozen=True)
class _Declaration:
    family: str
    name: str
    namespace: str
    versions: tuple[str, ...] | None

    def covers(self, contract: ToolContract) -> bool:
        return (contract.name, contract.namespace) == (self.name, self.namespace) and (
            self.versions is None or contract.version in self.versions
        )


def _tool(name: str, namespace: str, version: str | None = None) -> str:
    ns = f" (namespace {namespace})" if namespace else ""
    return f"{name} v{version}{ns}" if version else f"{name}{ns}"


def check_policies(policy_dir: Path, contracts_dir: Path, *, opa: Path) -> CheckReport:
    """Check ``policy_dir`` against the contracts of ``contracts_dir`` (and the built-in ones);
    ``opa``: the binary that parses the Rego. Raises ``PolicyLoadError`` (the policies do not
    load), ``ContractLoadError`` (a contract is invalid, or ``contracts_dir`` is no folder) or
    ``RegoParseError``."""
    if not Path(contracts_dir).is_dir():
        raise ContractLoadError(f"contracts folder {contracts_dir} does not exist")
    catalog = _catalog(policy_dir)
    contracts = ContractRegistry.load(contracts_dir).all()
    builtin = {(c.namespace, c.name, c.version) for c in BUILTIN_CONTRACTS}
    own = [c for c in contracts if (c.namespace, c.name, c.version) not in builtin]
    every_module = _modules(policy_dir, opa)
    # The families and the helper packages they import; the library (data.toolgate) is the project's.
    modules = [m for m in every_module if m.package[:1] != ("toolgate",)]
    declarations = [
        _Declaration(family, str(d["name"]), str(d["namespace"]),
                     tuple(d["versions"]) if d.get("versions") is not None else None)
        for family, entry in sorted(catalog["families"].items()) for d in entry["governs"]
    ]
    governs_at = {(family, tool): (m.file, line) for m in modules if (family := _family_of(m))
                  for tool, line in m.governs_lines().items()}
    findings = [
        *_catalog_findings(catalog.get("findings") or [], governs_at, modules),
        *_contracts_without_family(own, declarations),
        *_tools_without_contract(declarations, contracts, governs_at),
        *_field_findings(modules, declarations, contracts),
        *session_read_findings(SessionReadAnalysis(every_module)),
        *_message_findings(modules, declarations, contracts),
        *_test_named_rules(modules),
    ]
    unique = sorted(set(findings), key=lambda f: (f.severity != "error", f.file or "", f.line or 0, f.message))
    return CheckReport(unique, contracts=len(contracts), families=len(catalog["families"]))


def _catalog(policy_dir: Path) -> dict[str, Any]:
    """``data.toolgate.catalog`` of ``policy_dir`` (tests left out)."""
    from opa_bindings import OpaEngine, OpaError

    from app.policy.bundle import load_into

    engine = OpaEngine()
    try:
        load_into(engine, read_directory(policy_dir))
        try:
            catalog = engine.eval_document("toolgate.catalog")
        except OpaError as exc:
            raise PolicyLoadError(f"data.toolgate.catalog cannot be evaluated: {exc.message}") from None
    finally:
        engine.close()
    if not isinstance(catalog, dict) or not isinstance(catalog.get("families"), dict):
        raise PolicyLoadError("data.toolgate.catalog is not {families, problems, findings}")
    return catalog


def _family_of(module: RegoModule) -> str | None:
    package = module.package
    return package[1] if len(package) >= 2 and package[0] == _FAMILY_ROOT else None


def _modules(policy_dir: Path, opa: Path) -> list[RegoModule]:
    """The parsed modules of ``policy_dir`` (tests left out)."""
    bundle = read_directory(policy_dir)
    return [parse_module(opa, Path(policy_dir) / rel) for rel in bundle.modules]


def _families_reading(module: RegoModule, modules: list[RegoModule]) -> set[str]:
    """The families whose tools ``module``'s rules apply to: its own family, or, for a helper
    package, every family that imports it."""
    family = _family_of(module)
    if family:
        return {family}
    return {f for m in modules if (f := _family_of(m)) and m.imports_package(module.package)}


def _module_of(modules: Iterable[RegoModule], family: str) -> RegoModule | None:
    return next((m for m in modules if _family_of(m) == family), None)


def _catalog_findings(found: list[dict[str, Any]], governs_at: dict[tuple[str, str], tuple[str, int]],
                      modules: list[RegoModule]) -> Iterable[Finding]:
    """The catalog's findings, at the declaration they name (else the family's package)."""
    for item in found:
        family, tool = str(item.get("family")), item.get("tool")
        where = governs_at.get((family, str(tool))) if tool is not None else None
        if where is None:
            module = _module_of(modules, family)
            where = (module.file, int((module.ast.get("package") or {}).get("location", {}).get("row") or 0)) if module else None
        yield Finding("error", str(item.get("kind")), str(item.get("message")), *(where or (None, None)))


def _contract_location(contract: ToolContract) -> tuple[str, int | None]:
    """The contract's file and the line of its ``name``; a built-in contract's model."""
    path = Path(contract.source)
    if not path.is_file():
        return contract.source, None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if _YAML_NAME.match(line) or line.lstrip().startswith('"name"'):
            return contract.source, number
    return contract.source, None


def _contracts_without_family(contracts: list[ToolContract], declarations: list[_Declaration]) -> Iterable[Finding]:
    for contract in contracts:
        if not any(d.covers(contract) for d in declarations):
            yield Finding(
                "error", "no_family",
                f"contract {_tool(contract.name, contract.namespace, contract.version)} has no policy family: "
                "no family's governs declares it, so every call of it is denied (toolgate.no_family)",
                *_contract_location(contract),
            )


def _tools_without_contract(declarations: list[_Declaration], contracts: list[ToolContract],
                            governs_at: dict[tuple[str, str], tuple[str, int]]) -> Iterable[Finding]:
    for d in declarations:
        same_name = [c for c in contracts if c.name == d.name]
        here = [c for c in same_name if c.namespace == d.namespace]
        elsewhere = sorted({c.namespace or '""' for c in same_name if c.namespace != d.namespace})
        hint = f" (there is one in namespace {', '.join(elsewhere)})" if elsewhere and not here else ""
        where = governs_at.get((d.family, d.name), (None, None))
        if d.versions is None and not here:
            yield Finding("error", "no_contract",
                          f"family {d.family} governs tool {_tool(d.name, d.namespace)}, which has no contract{hint}", *where)
        for version in d.versions or ():
            if not any(c.version == version for c in here):
                yield Finding(
                    "error", "no_contract",
                    f"family {d.family} governs tool {_tool(d.name, d.namespace, version)}, which has no contract{hint}",
                    *where,
                )


def _test_named_rules(modules: list[RegoModule]) -> Iterable[Finding]:
    for module in modules:
        for name, line in module.test_named_rules().items():
            yield Finding(
                "error", "test_named_rule",
                f"rule {name} starts with test_, so opa test runs it as a test and fails; declare the tool in "
                'one object instead: governs := {"test_...": {...}}', module.file, line,
            )


# --- field reads -----------------------------------------------------------------------------


def _field_schema(contract: ToolContract, path: tuple[str, ...]) -> tuple[bool, bool]:
    """(``path`` is defined, it is always present) in the contract's input. An object schema
    that allows other members defines every name, as optional; below a schema without
    ``properties`` (a ``$ref``, a union, a scalar) nothing is known, and nothing is reported."""
    schema: Any = contract.input_schema
    always = True
    for depth, name in enumerate(path):
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(properties, dict):
            return True, True
        if name not in properties:
            return schema.get("additionalProperties") is not False, False
        present = contract.always_present() if depth == 0 else frozenset(schema.get("required") or ())
        always = always and name in present
        schema = properties[name]
    return True, always


def _governed(module: RegoModule, modules: list[RegoModule], declarations: list[_Declaration],
              contracts: list[ToolContract]) -> list[ToolContract]:
    """The contracts of the tools ``module``'s rules apply to (``_families_reading``)."""
    families = _families_reading(module, modules)
    return [c for c in contracts if any(d.family in families and d.covers(c) for d in declarations)]


def _field_findings(modules: list[RegoModule], declarations: list[_Declaration],
                    contracts: list[ToolContract]) -> Iterable[Finding]:
    for module in modules:
        governed = _governed(module, modules, declarations, contracts)
        for read in module.field_reads():
            scope = [c for c in governed if read.tools is None or c.name in read.tools]
            if scope:
                yield from _read_findings(module.file, read, scope)


def _read_findings(file: str, read: FieldRead, scope: list[ToolContract]) -> Iterable[Finding]:
    shown = "input.call.input." + ".".join(read.path)
    schemas = {id(c): _field_schema(c, read.path) for c in scope}
    missing = [c for c in scope if not schemas[id(c)][0]]
    if read.tools is None and len(missing) == len(scope):
        tools = ", ".join(_tool(c.name, c.namespace, c.version) for c in scope)
        yield Finding("warning", "undefined_field",
                      f"rule {read.rule} reads {shown}, which no contract of the family's tools defines ({tools})",
                      file, read.line)
    elif read.tools is not None:
        for c in missing:
            yield Finding("warning", "undefined_field",
                          f"rule {read.rule} reads {shown}, which the contract of "
                          f"{_tool(c.name, c.namespace, c.version)} does not define", file, read.line)
    if read.defaulted:
        return
    for c in scope:
        defined, always = schemas[id(c)]
        if defined and not always:
            yield Finding(
                "warning", "optional_without_default",
                f"rule {read.rule} reads {shown} without a default, and the field is optional in "
                f"{_tool(c.name, c.namespace, c.version)}: when it is absent the rule silently does not fire "
                f"(read it with object.get(lib.args, {json.dumps(list(read.path)) if len(read.path) > 1 else json.dumps(read.path[0])}, <default>))",
                file, read.line,
            )


# --- session reads ---------------------------------------------------------------------------


def session_read_findings(analysis: SessionReadAnalysis) -> Iterable[Finding]:
    """Each family's ``session_reads`` against what its rules read (``app.policy.session_reads``),
    and reads of the session outside the families."""
    for family, (reads, declaration, file) in analysis.family_reads().items():
        if declaration is None:
            yield Finding("warning", "no_session_reads",
                          f"family {family} declares no session_reads: every call of its tools builds the whole "
                          "session (declare session_reads := set() when it reads none)", file)
            continue
        if declaration.members is None:
            yield Finding("error", "malformed_session_reads",
                          f"family {family}: session_reads is not a literal set of strings", declaration.file,
                          declaration.line)
            continue
        for member, site in sorted(reads.items()):
            if not covers(declaration.members, member):
                yield Finding("error", "undeclared_session_read",
                              f"family {family} reads input.{member} (rule {site.rule}, {site.file}:{site.line}) but its "
                              "session_reads does not declare it: the gateway would not build it", declaration.file,
                              declaration.line)
        for member in sorted(declaration.members):
            if member != "*" and not any(covers(frozenset({member}), read) or covers(frozenset({read}), member)
                                         for read in reads):
                yield Finding("warning", "unread_session_reads",
                              f"family {family} declares input.{member} in session_reads, which none of its rules "
                              "reads: every call of its tools builds it for nothing", declaration.file, declaration.line)
    for package, reads in analysis.outside_families().items():
        for member, site in sorted(reads.items()):
            yield Finding("error", "session_read_outside_family",
                          f"package {'.'.join(package)} reads input.{member} (rule {site.rule}): only policy families "
                          "may read the session (the gateway builds it for what they declare)", site.file, site.line)


def _message_findings(modules: list[RegoModule], declarations: list[_Declaration],
                      contracts: list[ToolContract]) -> Iterable[Finding]:
    for module in modules:
        governed = _governed(module, modules, declarations, contracts)
        for quoted in module.quoted_reads():
            for c in governed:
                if quoted.tools is None or c.name in quoted.tools:
                    yield from _quoted_sensitive(module.file, quoted, c)


def _quoted_sensitive(file: str, quoted: QuotedRead, contract: ToolContract) -> Iterable[Finding]:
    """A finding when ``quoted`` is, or holds, a sensitive path of ``contract``."""
    pointer = "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in quoted.path)
    hit = [s for s in contract.meta.sensitive_paths if s == pointer or s.startswith(pointer + "/")]
    if hit:
        yield Finding(
            "warning", "sensitive_in_message",
            f"rule {quoted.rule} quotes input.call.input.{'.'.join(quoted.path)} in a message, and "
            f"{_tool(contract.name, contract.namespace, contract.version)} marks {hit[0]} sensitive: messages are reasons, "
            "shown in responses, signed in receipts and logged unredacted (name the field, not its value)",
            file, quoted.line,
        )
