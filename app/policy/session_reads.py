"""Which session facts each policy family reads, from the AST of every module
(``app.policy.rego_ast``), checked against the family's ``session_reads`` declaration
(docs/session.md "Facts on demand"; the gateway builds only the declared members).

A rule **reads** a member when any of its terms refers to it, directly or through the rules
and functions it uses (of its own package, of ``toolgate.lib``, of any package, transitively):

    input.session.conversation.labels        -> session.conversation.labels
    input.session[scope].calls[window]       -> session.conversation.calls, session.subject.calls
    input.session.conversation               -> session.conversation (every member)
    input.session, input.session[k]          -> session
    input.history.tools                      -> history
    input.provenance.arguments[p]            -> provenance.arguments
    input.provenance, input.provenance[k]    -> provenance (every member)
    input, input[k]                          -> * (everything)

So a family that calls ``lib.trusted_counterparty(x)`` reads what that function reads. The
analysis errs on the side of reading more: a variable key stands for every key, a rule named
like a local variable counts as used, a reference to a package as a whole uses every rule of
it. A family's reads are those of every rule of its package (the combining library may ask
any of them).

Findings (``app.policy.check.Finding``):

- ``undeclared_session_read`` (error): a family reads a member its declaration does not cover
  (the gateway would not build it: the rule would silently see it undefined);
- ``malformed_session_reads`` (error): the declaration is not a literal set of strings;
- ``session_read_outside_family`` (error): a package other than a family or the library reads
  the session (the combining library runs for every call; the gateway builds the session
  only for the families that declare it);
- ``no_session_reads`` (warning): a family declares nothing, so every call of its tools builds
  the whole session;
- ``unread_session_reads`` (warning): a declared member that no rule of the family reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from app.policy.rego_ast import RegoModule, Term

_SCOPES = ("conversation", "subject")
_SCOPE_MEMBERS = {"id", "calls", "denied", "amounts", "counterparties", "approved_tools", "resources", "labels",
                  "untraced_labels", "trusted_counterparties"}
_PROVENANCE_MEMBERS = {"arguments", "extracted", "untraced_labels"}
_FAMILY_ROOT = "tools"
_LIBRARY = ("toolgate", "lib")
#: The name of a family's declaration.
DECLARATION = "session_reads"

RuleId = tuple[tuple[str, ...], str]


@dataclass(frozen=True)
class Site:
    """Where a member is read: the module's ``file``, the ``line`` and the ``rule``."""

    file: str
    line: int
    rule: str


@dataclass(frozen=True)
class Declaration:
    """A family's ``session_reads``: the declared ``members`` (None: not a literal set of
    strings), at ``line`` of ``file``."""

    members: frozenset[str] | None
    file: str
    line: int


def members_of(path: list[str | None]) -> set[str]:
    """The members that a reference from ``input`` reads (``path`` without ``input``; None for
    a variable segment): none for another input member, both scopes for a variable scope."""
    if not path or path[0] is None:
        return {"*"}
    if path[0] == "history":
        return {"history"}
    if path[0] == "provenance":
        if len(path) == 1 or path[1] not in _PROVENANCE_MEMBERS:
            return {"provenance"}
        return {f"provenance.{path[1]}"}
    if path[0] != "session":
        return set()
    if len(path) == 1:
        return {"session"}
    if path[1] is None:  # any member of input.session: only a scope has a member of these names
        if len(path) > 2 and path[2] in _SCOPE_MEMBERS:
            return {f"session.{scope}.{path[2]}" for scope in _SCOPES}
        return {"session"}
    if path[1] not in _SCOPES or len(path) == 2 or path[2] is None:
        return {f"session.{path[1]}"}
    return {f"session.{path[1]}.{path[2]}"}


def covers(declared: frozenset[str], member: str) -> bool:
    """Whether the ``declared`` members include ``member`` (itself or a member above it)."""
    return any(d == "*" or d == member or member.startswith(d + ".") for d in declared)


class _Package:
    """The rules of one package: for each rule name, what it reads and which rules it uses."""

    def __init__(self, path: tuple[str, ...]) -> None:
        self.path = path
        self.reads: dict[str, dict[str, Site]] = {}
        self.uses: dict[str, set[RuleId | tuple[tuple[str, ...], None]]] = {}
        self.declaration: Declaration | None = None
        self.file = ""


class SessionReadAnalysis:
    """The session reads of every package of a policy (parsed modules, tests left out)."""

    def __init__(self, modules: Iterable[RegoModule]) -> None:
        self._packages: dict[tuple[str, ...], _Package] = {}
        parsed = list(modules)
        for module in parsed:
            package = self._packages.setdefault(module.package, _Package(module.package))
            package.file = package.file or module.file
            for rule in module.rules:
                name = _rule_head(rule)
                if name is not None:
                    package.reads.setdefault(name, {})
                    package.uses.setdefault(name, set())
        for module in parsed:
            self._scan(module)

    def _scan(self, module: RegoModule) -> None:
        package = self._packages[module.package]
        imports = module.imports
        for rule in module.rules:
            name = _rule_head(rule)
            if name is None:
                continue
            if name == DECLARATION and _family(module.package):
                package.declaration = Declaration(_declared(rule), module.file, _line(rule))
                continue
            for term, line in _terms(rule):
                self._note(package, name, term, line, imports, module.file)

    def _note(self, package: _Package, rule: str, term: Term, line: int,
              imports: dict[str, tuple[str, ...]], file: str) -> None:
        if term.get("type") == "var":
            head, rest = str(term.get("value")), []
        else:
            segments = term.get("value") or []
            head = str(segments[0].get("value"))
            rest = [str(t["value"]) if t.get("type") == "string" else None for t in segments[1:]]
        path: list[str | None] = [*imports.get(head, (head,)), *rest]
        if path[0] == "input":
            for member in members_of(path[1:]):
                package.reads[rule].setdefault(member, Site(file, line, rule))
        elif path[0] == "data":
            package.uses[rule].update(self._targets(path[1:]))
        elif head in package.reads:
            package.uses[rule].add((package.path, head))

    def _targets(self, path: list[str | None]) -> Iterator[RuleId | tuple[tuple[str, ...], None]]:
        """The rules a ``data`` reference names: ``(package, rule)``, or ``(package, None)`` for
        every rule of a package it names as a whole or through a variable key."""
        static: list[str] = []
        for segment in path:
            if segment is None:
                break
            static.append(segment)
        for name in self._packages:
            if tuple(static[: len(name)]) == name:
                rule = path[len(name)] if len(path) > len(name) else None
                yield (name, rule) if rule is not None else (name, None)
            elif name[: len(static)] == tuple(static):
                yield (name, None)

    def _closure(self, roots: Iterable[RuleId], *, into_families: bool) -> dict[str, Site]:
        """What ``roots`` read, through every rule they use (not into family packages unless
        ``into_families``)."""
        reads: dict[str, Site] = {}
        seen: set[RuleId] = set()
        stack = list(roots)
        while stack:
            package_path, rule = stack.pop()
            if (package_path, rule) in seen:
                continue
            seen.add((package_path, rule))
            package = self._packages[package_path]
            for member, site in package.reads.get(rule, {}).items():
                reads.setdefault(member, site)
            for target, name in package.uses.get(rule, ()):
                if not into_families and _family(target) and target != package_path:
                    continue
                names = [name] if name is not None else list(self._packages[target].reads)
                stack.extend((target, n) for n in names if n in self._packages[target].reads)
        return reads

    def family_reads(self) -> dict[str, tuple[dict[str, Site], Declaration | None, str]]:
        """Per family: what its rules read (member -> first site found), its declaration and
        its module file."""
        out = {}
        for path, package in sorted(self._packages.items()):
            family = _family(path)
            if family:
                roots = [(path, name) for name in package.reads]
                out[family] = (self._closure(roots, into_families=True), package.declaration, package.file)
        return out

    def outside_families(self) -> dict[tuple[str, ...], dict[str, Site]]:
        """Per package that is neither a family nor the library: what it reads (not counting
        the families it consults); only packages that read something."""
        out = {}
        for path, package in sorted(self._packages.items()):
            if _family(path) or path[: len(_LIBRARY)] == _LIBRARY:
                continue
            reads = self._closure([(path, name) for name in package.reads], into_families=False)
            if reads:
                out[path] = reads
        return out


def _family(package: tuple[str, ...]) -> str | None:
    return package[1] if len(package) >= 2 and package[0] == _FAMILY_ROOT else None


def _rule_head(rule: dict[str, Any]) -> str | None:
    ref = (rule.get("head") or {}).get("ref") or []
    return str(ref[0].get("value")) if ref else None


def _line(node: dict[str, Any]) -> int:
    return int((node.get("location") or {}).get("row") or 0)


def _declared(rule: dict[str, Any]) -> frozenset[str] | None:
    """A declaration's members: a set literal of strings, or ``set()``."""
    value = (rule.get("head") or {}).get("value") or {}
    if value.get("type") == "set" and all(t.get("type") == "string" for t in value.get("value") or []):
        return frozenset(str(t["value"]) for t in value.get("value") or [])
    if value.get("type") == "call" and len(value.get("value") or []) == 1:
        op = value["value"][0]
        if op.get("type") == "ref" and [t.get("value") for t in op.get("value") or []] == ["set"]:
            return frozenset()
    return None


def _terms(node: Any, line: int = 0) -> Iterator[tuple[Term, int]]:
    """Every reference term (a ``ref``, or a ``var`` outside one) under ``node`` with its line;
    a reference's own segments are searched too (a key may be a reference)."""
    if isinstance(node, list):
        for item in node:
            yield from _terms(item, line)
        return
    if not isinstance(node, dict):
        return
    line = _line(node) or line
    kind = node.get("type")
    if kind == "ref" and isinstance(node.get("value"), list) and node["value"]:
        head = node["value"][0]
        if head.get("type") == "var":
            yield node, line
        else:
            yield from _terms(head, line)
        yield from _terms(node["value"][1:], line)
        return
    if kind == "var":
        yield node, line
        return
    for key, value in node.items():
        if key != "location" and isinstance(value, (dict, list)):
            yield from _terms(value, line)
