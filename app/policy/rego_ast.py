"""What a Rego module reads from the tool input, from its AST: ``opa parse --format json`` of
the pinned ``opa`` binary (the embedded engine does not expose the AST).

``parse_module(opa, path)`` parses one file into a ``RegoModule``: its package path, the lines
of its ``governs.<tool>`` declarations, and every ``FieldRead`` of the tool input
(``input.call.input``): where, which field path, whether it has a default, and which tools the
rule that reads it is limited to.

A read is **direct** (undefined when the field is absent, so the rule silently does not fire):

    input.call.input.amount          lib.args.amount          x.amount  (x := input.call.input)
    args.amount  (a rule of the package: args := lib.args)

and **defaulted** when it names a fallback:

    object.get(lib.args, "amount", 0)   object.get(input.call.input, ["a", "b"], null)
    lib.arg("amount", 0)   lib.string_arg / lib.number_arg / lib.array_arg("f", d)   lib.has_arg("f")

``lib`` is whatever name imports ``data.toolgate.lib``; ``data.toolgate.lib.args`` is the same
as ``lib.args``. A read through a variable key (``lib.args[k]``, ``some k, v in lib.args``) names
no field and is not reported.

A rule's message **quotes** a field (``RegoModule.quoted_reads``) when a ``sprintf`` argument
reads it: directly, through a variable of the rule bound to a read (``p := lib.args.path``), or
through a rule of the package whose value reads it (``path := lib.string_arg("path", "")``, and
rules built on such rules).

A rule is **limited** to tools by top-level, non-negated conditions of its body:
``input.tool.name == "t"``, ``input.tool.name in {...}`` (a literal or a constant rule of the
package), ``lib.call_of("t")``, ``lib.call_of_version("t", v)``, ``lib.call_in_namespace(ns,
"t")`` and ``lib.call_among({...})``; several conditions intersect. Reads in an ``else``
branch count as unlimited.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LIB = ("data", "toolgate", "lib")
_ARGS_BASES = (("input", "call", "input"), (*LIB, "args"))
#: lib helpers whose first argument is a field key read with a default.
_DEFAULTED_HELPERS = {"arg", "string_arg", "number_arg", "array_arg", "has_arg"}
_TOOL_NAME = ("input", "tool", "name")
_PARSE_TIMEOUT_S = 60

Term = dict[str, Any]


class RegoParseError(RuntimeError):
    """``opa parse`` could not run or refused the file; the message names the file."""


@dataclass(frozen=True)
class FieldRead:
    """One read of the tool input: ``path`` (field names from the top of ``input.call.input``),
    ``defaulted`` (a fallback is named), the ``line`` of the read, the ``rule`` that reads it
    (``deny[amount_not_positive]``, ``amount``), and ``tools``: the tool names the rule is
    limited to, or None when it is not."""

    path: tuple[str, ...]
    defaulted: bool
    line: int
    rule: str
    tools: frozenset[str] | None


@dataclass(frozen=True)
class QuotedRead:
    """A field of the tool input that a ``sprintf`` of a rule quotes: ``path``, the ``line`` of
    the ``sprintf``, the ``rule`` and the ``tools`` it is limited to (None: not limited)."""

    path: tuple[str, ...]
    line: int
    rule: str
    tools: frozenset[str] | None


@dataclass(frozen=True)
class RegoModule:
    """One parsed module: ``file`` (as given to ``parse_module``) and its AST."""

    file: str
    ast: dict[str, Any]

    @property
    def package(self) -> tuple[str, ...]:
        """The package path without ``data``: ``("tools", "banking")``."""
        path = self.ast.get("package", {}).get("path", [])
        return tuple(str(t.get("value")) for t in path[1:])

    @property
    def rules(self) -> list[dict[str, Any]]:
        return list(self.ast.get("rules") or [])

    @property
    def imports(self) -> dict[str, tuple[str, ...]]:
        """Import alias -> the imported path (``lib`` -> ``("data", "toolgate", "lib")``)."""
        return _imports(self.ast)

    def imports_package(self, package: tuple[str, ...]) -> bool:
        """This module imports ``package`` (``("shared", "travel")``) or a part of it."""
        wanted = ("data", *package)
        return any(path[: len(wanted)] == wanted for path in _imports(self.ast).values())

    def governs_lines(self) -> dict[str, int]:
        """Tool name -> line of its ``governs.<tool>`` rule (``governs := {...}``: the line of
        that rule for each of its keys)."""
        lines: dict[str, int] = {}
        for rule in self.rules:
            head = rule.get("head", {})
            ref = head.get("ref") or []
            if not ref or ref[0].get("value") != "governs":
                continue
            line = _line(rule)
            if len(ref) == 2 and ref[1].get("type") == "string":
                lines.setdefault(str(ref[1]["value"]), line)
            elif len(ref) == 1 and (head.get("value") or {}).get("type") == "object":
                for key, _ in head["value"]["value"]:
                    if key.get("type") == "string":
                        lines.setdefault(str(key["value"]), line)
        return lines

    def test_named_rules(self) -> dict[str, int]:
        """Rule name -> line for every rule that is no test but that ``opa test`` runs as one:
        a rule whose last name starts with ``test_`` outside a ``*_test`` package (e.g.
        ``governs.test_connection``, the rule of a tool named ``test_connection``)."""
        if self.package and self.package[-1].endswith("_test"):
            return {}
        found: dict[str, int] = {}
        for rule in self.rules:
            ref = (rule.get("head") or {}).get("ref") or []
            last = str(ref[-1].get("value")) if ref else ""
            if last.startswith("test_"):
                name = ".".join(str(t.get("value")) for t in ref)
                found.setdefault(name, _line(rule))
        return found

    def field_reads(self) -> list[FieldRead]:
        """Every read of the tool input in this module, in source order."""
        imports = _imports(self.ast)
        constants = _constants(self.rules)
        package_aliases = {name for name, value in _plain_values(self.rules) if _is_args_base(value, imports, set())}
        reads: list[FieldRead] = []
        for rule in self.rules:
            name = _rule_name(rule)
            local_aliases = set(package_aliases) | _local_aliases(rule, imports)
            scan = _Scan(imports, local_aliases, name)
            tools = _guard(rule.get("body") or [], imports, constants)
            main = {k: v for k, v in rule.items() if k != "else"}
            reads.extend(scan.reads(main, tools))
            if "else" in rule:
                reads.extend(scan.reads(rule["else"], None))
        return sorted(set(reads), key=lambda r: (r.line, r.path, r.defaulted))

    def quoted_reads(self) -> list[QuotedRead]:
        """Every field a ``sprintf`` in this module's rules quotes, in source order."""
        imports = _imports(self.ast)
        constants = _constants(self.rules)
        package_aliases = {name for name, value in _plain_values(self.rules) if _is_args_base(value, imports, set())}
        by_rule = _fields_by_rule(self.rules, imports, package_aliases)
        quoted: set[QuotedRead] = set()
        for rule in self.rules:
            name = _rule_name(rule)
            scan = _Scan(imports, set(package_aliases) | _local_aliases(rule, imports), name)
            known = dict(by_rule)
            known.update(_bound_fields(rule, imports, scan, known))
            tools = _guard(rule.get("body") or [], imports, constants)
            for node in _walk(rule):
                parts = _call_parts(node)
                if not parts or _ref_path(parts[0], imports) != ["sprintf"] or len(parts) < 3:
                    continue
                for path in _fields_of(parts[2], scan, known):
                    quoted.add(QuotedRead(path, _line(parts[0]), name, tools))
        return sorted(quoted, key=lambda q: (q.line, q.path))


def parse_module(opa: Path, path: Path) -> RegoModule:
    """``opa parse --format json`` of ``path`` with locations. Raises ``RegoParseError``."""
    argv = [str(opa), "parse", "--format", "json", "--json-include", "locations,-comments", str(path)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=_PARSE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RegoParseError(f"{path}: opa parse could not run: {exc}") from None
    if done.returncode != 0:
        raise RegoParseError(f"{path}: {(done.stderr or done.stdout).strip()[-2000:]}")
    try:
        ast = json.loads(done.stdout)
    except ValueError:
        raise RegoParseError(f"{path}: opa parse printed no JSON AST") from None
    if not isinstance(ast, dict):
        raise RegoParseError(f"{path}: opa parse printed no JSON AST")
    return RegoModule(str(path), ast)


# --- terms -------------------------------------------------------------------------------------


def _line(node: dict[str, Any]) -> int:
    return int((node.get("location") or {}).get("row") or 0)


def _imports(ast: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Import alias -> the imported path (``lib`` -> ``("data", "toolgate", "lib")``)."""
    found: dict[str, tuple[str, ...]] = {}
    for entry in ast.get("imports") or []:
        terms = (entry.get("path") or {}).get("value") or []
        path = tuple(str(t.get("value")) for t in terms)
        if path and all(t.get("type") in ("var", "string") for t in terms):
            found[str(entry.get("alias") or path[-1])] = path
    return found


def _ref_path(term: Term, imports: dict[str, tuple[str, ...]]) -> list[str | None] | None:
    """The segments of a ref term with import aliases resolved; None for a segment that is not
    a constant string (a variable key, a number). None when ``term`` is no ref to a name."""
    if term.get("type") != "ref":
        return None
    terms = term.get("value") or []
    if not terms or terms[0].get("type") != "var":
        return None
    head = str(terms[0]["value"])
    path: list[str | None] = list(imports.get(head, (head,)))
    path.extend(str(t["value"]) if t.get("type") == "string" else None for t in terms[1:])
    return path


def _is_args_base(term: Term, imports: dict[str, tuple[str, ...]], aliases: set[str]) -> bool:
    """``term`` is exactly the tool input: ``input.call.input``, ``lib.args`` or an alias."""
    if term.get("type") == "var":
        return str(term.get("value")) in aliases
    path = _ref_path(term, imports)
    return path is not None and (tuple(path) in _ARGS_BASES or (len(path) == 1 and path[0] in aliases))


def _field_path(segments: list[str | None]) -> tuple[str, ...]:
    out = []
    for segment in segments:
        if segment is None:
            break
        out.append(segment)
    return tuple(out)


def _key_path(term: Term) -> tuple[str, ...] | None:
    """A field key given to ``object.get`` or a lib helper: a string, or an array of strings."""
    if term.get("type") == "string":
        return (str(term["value"]),)
    if term.get("type") == "array":
        items = term.get("value") or []
        if items and all(t.get("type") == "string" for t in items):
            return tuple(str(t["value"]) for t in items)
    return None


def _strings(term: Term, constants: dict[str, frozenset[str]]) -> frozenset[str] | None:
    """A set or array literal of strings, or a var naming a constant rule of such."""
    if term.get("type") in ("set", "array"):
        items = term.get("value") or []
        if all(t.get("type") == "string" for t in items):
            return frozenset(str(t["value"]) for t in items)
        return None
    if term.get("type") == "var":
        return constants.get(str(term.get("value")))
    return None


def _trivial_body(rule: dict[str, Any]) -> bool:
    """The body is the ``true`` the parser writes for a rule without conditions."""
    body = rule.get("body") or []
    terms = body[0].get("terms") if len(body) == 1 else None
    return isinstance(terms, dict) and terms.get("type") == "boolean" and terms.get("value") is True


def _plain_values(rules: list[dict[str, Any]]) -> Iterator[tuple[str, Term]]:
    """(name, value term) of every rule ``name := value`` with no arguments, key or condition."""
    for rule in rules:
        head = rule.get("head", {})
        ref = head.get("ref") or []
        if len(ref) == 1 and not head.get("args") and "key" not in head and head.get("value") and _trivial_body(rule):
            yield str(ref[0].get("value")), head["value"]


def _constants(rules: list[dict[str, Any]]) -> dict[str, frozenset[str]]:
    """Rules of the package whose value is a constant set or array of strings."""
    found: dict[str, frozenset[str]] = {}
    for name, value in _plain_values(rules):
        strings = _strings(value, {})
        if strings is not None and value.get("type") in ("set", "array"):
            found[name] = strings
    return found


def _rule_name(rule: dict[str, Any]) -> str:
    """``deny[amount_not_positive]`` for a contribution, else the rule's ref (``amount``,
    ``governs.readFile``)."""
    head = rule.get("head", {})
    ref = head.get("ref") or []
    name = ".".join(str(t.get("value")) for t in ref) or str(head.get("name"))
    key = head.get("key") or {}
    if key.get("type") == "object":
        for k, v in key.get("value") or []:
            if k.get("value") == "rule" and v.get("type") == "string":
                return f"{name}[{v['value']}]"
    return name


def _call_parts(node: Any) -> list[Term] | None:
    """[operator, args...] of a call: an expression's term list or a ``call`` term."""
    if isinstance(node, list) and node and isinstance(node[0], dict) and node[0].get("type") == "ref":
        return node
    if isinstance(node, dict) and node.get("type") == "call":
        value = node.get("value")
        return value if isinstance(value, list) and value else None
    return None


def _local_aliases(rule: dict[str, Any], imports: dict[str, tuple[str, ...]]) -> set[str]:
    """Variables of the rule bound to the whole tool input (``x := input.call.input``)."""
    found: set[str] = set()
    for node in _walk(rule):
        parts = _call_parts(node)
        if not parts or len(parts) != 3:
            continue
        op = _ref_path(parts[0], imports)
        if op not in (["assign"], ["eq"]):
            continue
        for var, value in ((parts[1], parts[2]), (parts[2], parts[1])):
            if var.get("type") == "var" and _is_args_base(value, imports, set()):
                found.add(str(var["value"]))
    return found


def _walk(node: Any) -> Iterator[Any]:
    """Every dict and list under ``node`` (``node`` included), depth first."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, dict):
            stack.extend(v for k, v in current.items() if k != "location" and isinstance(v, (dict, list)))
        elif isinstance(current, list):
            stack.extend(v for v in current if isinstance(v, (dict, list)))


def _guard(body: list[dict[str, Any]], imports: dict[str, tuple[str, ...]],
           constants: dict[str, frozenset[str]]) -> frozenset[str] | None:
    """The tool names the body's top-level conditions limit it to, or None."""
    limit: frozenset[str] | None = None
    for expr in body:
        if expr.get("negated"):
            continue
        parts = _call_parts(expr.get("terms"))
        if not parts:
            continue
        names = _guard_names(parts, imports, constants)
        if names is not None:
            limit = names if limit is None else limit & names
    return limit


def _guard_names(parts: list[Term], imports: dict[str, tuple[str, ...]],
                 constants: dict[str, frozenset[str]]) -> frozenset[str] | None:
    op = _ref_path(parts[0], imports)
    args = parts[1:]
    if op == ["equal"] and len(args) == 2:
        for a, b in ((args[0], args[1]), (args[1], args[0])):
            if _ref_path(a, imports) == list(_TOOL_NAME) and b.get("type") == "string":
                return frozenset({str(b["value"])})
    if op == ["internal", "member_2"] and len(args) == 2 and _ref_path(args[0], imports) == list(_TOOL_NAME):
        return _strings(args[1], constants)
    if op is None or len(op) != 4 or tuple(op[:3]) != LIB:
        return None
    helper = op[3]
    if helper in ("call_of", "call_of_version") and args and args[0].get("type") == "string":
        return frozenset({str(args[0]["value"])})
    if helper == "call_in_namespace" and len(args) == 2 and args[1].get("type") == "string":
        return frozenset({str(args[1]["value"])})
    if helper == "call_among" and args:
        return _strings(args[0], constants)
    return None


def _fields_of(node: Any, scan: _Scan, known: dict[str, frozenset[tuple[str, ...]]]) -> frozenset[tuple[str, ...]]:
    """The fields ``node`` reads: its own reads, and those of the variables in it that ``known``
    maps (rules of the package, variables of the rule)."""
    fields = {read.path for read in scan.reads(node, None)}
    for current in _walk(node):
        if isinstance(current, dict) and current.get("type") == "var":
            fields |= known.get(str(current.get("value")), frozenset())
        elif isinstance(current, dict) and current.get("type") == "ref":
            head = (current.get("value") or [{}])[0]
            if head.get("type") == "var":
                fields |= known.get(str(head.get("value")), frozenset())
    return frozenset(fields)


def _fields_by_rule(rules: list[dict[str, Any]], imports: dict[str, tuple[str, ...]],
                    aliases: set[str]) -> dict[str, frozenset[tuple[str, ...]]]:
    """Rule name -> the fields its value depends on (the reads of the whole rule, and those of
    the package's rules it names), for the rules with a plain name (``path``, ``segments``)."""
    known: dict[str, frozenset[tuple[str, ...]]] = {}
    named = [(str((rule.get("head", {}).get("ref") or [{}])[0].get("value")), rule) for rule in rules
             if len(rule.get("head", {}).get("ref") or []) == 1]
    for _ in range(len(named) + 1):
        changed = False
        for name, rule in named:
            fields = known.get(name, frozenset()) | _fields_of(rule, _Scan(imports, aliases, name), known)
            if fields != known.get(name, frozenset()):
                known[name], changed = fields, True
        if not changed:
            break
    return known


def _bound_fields(rule: dict[str, Any], imports: dict[str, tuple[str, ...]], scan: _Scan,
                  known: dict[str, frozenset[tuple[str, ...]]]) -> dict[str, frozenset[tuple[str, ...]]]:
    """Variables of ``rule`` bound (``:=``, ``=``) to a value that reads fields -> those fields."""
    bound: dict[str, frozenset[tuple[str, ...]]] = {}
    for node in _walk(rule.get("body") or []):
        parts = _call_parts(node)
        if not parts or len(parts) != 3 or _ref_path(parts[0], imports) not in (["assign"], ["eq"]):
            continue
        for var, value in ((parts[1], parts[2]), (parts[2], parts[1])):
            if var.get("type") == "var":
                fields = _fields_of(value, scan, {**known, **bound})
                if fields:
                    bound[str(var["value"])] = fields
    return bound


class _Scan:
    """Finds the field reads of one rule."""

    def __init__(self, imports: dict[str, tuple[str, ...]], aliases: set[str], rule: str) -> None:
        self._imports = imports
        self._aliases = aliases
        self._rule = rule

    def reads(self, node: Any, tools: frozenset[str] | None) -> Iterator[FieldRead]:
        for current in _walk(node):
            parts = _call_parts(current)
            if parts:
                found = self._defaulted(parts)
                if found is not None:
                    yield FieldRead(found[0], True, found[1], self._rule, tools)
            if isinstance(current, dict) and current.get("type") == "ref":
                path = self._direct(current)
                if path:
                    yield FieldRead(path, False, _line(current), self._rule, tools)

    def _direct(self, term: Term) -> tuple[str, ...] | None:
        path = _ref_path(term, self._imports)
        if path is None:
            return None
        for base in _ARGS_BASES:
            if tuple(path[: len(base)]) == base and len(path) > len(base):
                return _field_path(path[len(base):]) or None
        if len(path) > 1 and path[0] in self._aliases:
            return _field_path(path[1:]) or None
        return None

    def _defaulted(self, parts: list[Term]) -> tuple[tuple[str, ...], int] | None:
        op = _ref_path(parts[0], self._imports)
        args = parts[1:]
        if op == ["object", "get"] and len(args) == 3 and _is_args_base(args[0], self._imports, self._aliases):
            key = _key_path(args[1])
        elif op is not None and len(op) == 4 and tuple(op[:3]) == LIB and op[3] in _DEFAULTED_HELPERS and args:
            key = _key_path(args[0])
        else:
            return None
        return (key, _line(parts[0])) if key else None
