"""The field reads and tool limits ``app.policy.rego_ast`` finds in the AST that the pinned
``opa parse`` prints: each form of direct and defaulted read, aliases, import names, and each
form of tool condition. Real ``opa`` binary."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.policy.rego_ast import FieldRead, RegoParseError, parse_module
from app.policy.toolchain import opa_binary

OPA = opa_binary()

MODULE = '''package tools.sample

import data.toolgate.lib
import data.toolgate.lib as helpers

tools := {"a", "b"}

args := lib.args

governs.a := {"versions": ["1"]}

governs["b"] := {}

amount := object.get(lib.args, "amount", 0)

deny contains {"rule": "direct", "message": "m"} if {
	input.tool.name == "a"
	input.call.input.recipient == "x"
	lib.args.memo != ""
	data.toolgate.lib.args.note != ""
	args.code == 1
	helpers.args.extra == 2
	x := input.call.input
	x.alias_field == 3
	input.call.input.address.city == "Paris"
	some item in input.call.input.items
	item == 1
}

approval_required contains {"rule": "defaulted", "message": "m"} if {
	input.tool.name in tools
	lib.string_arg("s", "") != ""
	lib.number_arg("n", 0) > 1
	lib.array_arg("l", []) != []
	lib.arg(["p", "q"], null) != null
	lib.has_arg("h")
	object.get(input.call.input, "o", null) != null
}

allow contains {"rule": "limited", "message": "m"} if {
	lib.call_among(tools)
	lib.call_of_version("b", "1")
	not input.tool.name == "a"
	lib.args.only_b
}

allow contains {"rule": "namespaced", "message": "m"} if {
	lib.call_in_namespace("suite", "a")
	lib.args.in_suite
}

allow contains {"rule": "variable_keys", "message": "m"} if {
	some k, v in lib.args
	lib.args[k] == v
}

label := input.call.input.label if {
	lib.call_of("a")
} else := object.get(lib.args, "fallback", "")
'''


@pytest.fixture
def module(tmp_path: Path):
    assert OPA is not None, "scripts/install.sh builds .tools/bin/opa"
    path = tmp_path / "sample.rego"
    path.write_text(MODULE, encoding="utf-8")
    return parse_module(OPA, path)


def _line(text: str) -> int:
    return next(n for n, line in enumerate(MODULE.splitlines(), start=1) if text in line)


def test_package_and_governs_lines(module) -> None:
    assert module.package == ("tools", "sample")
    assert module.governs_lines() == {"a": _line("governs.a"), "b": _line('governs["b"]')}


def test_direct_reads_in_every_spelling(module) -> None:
    direct = {r.path: r for r in module.field_reads() if r.rule == "deny[direct]"}
    assert set(direct) == {("recipient",), ("memo",), ("note",), ("code",), ("extra",), ("alias_field",),
                           ("address", "city"), ("items",)}
    assert all(not r.defaulted and r.tools == frozenset({"a"}) for r in direct.values())
    assert direct[("memo",)].line == _line("lib.args.memo")


def test_defaulted_reads_through_object_get_and_the_helpers(module) -> None:
    reads = module.field_reads()
    defaulted = {r.path for r in reads if r.rule == "approval_required[defaulted]"}
    assert defaulted == {("s",), ("n",), ("l",), ("p", "q"), ("h",), ("o",)}
    assert all(r.defaulted and r.tools == frozenset({"a", "b"}) for r in reads if r.rule == "approval_required[defaulted]")
    assert FieldRead(("amount",), True, _line('amount := '), "amount", None) in reads


def test_tool_conditions_intersect_and_negations_do_not_limit(module) -> None:
    reads = {r.rule: r for r in module.field_reads()}
    assert reads["allow[limited]"].tools == frozenset({"b"})
    assert reads["allow[namespaced]"].tools == frozenset({"a"})


def test_variable_keys_name_no_field(module) -> None:
    assert [r for r in module.field_reads() if r.rule == "allow[variable_keys]"] == []


def test_an_else_branch_is_not_limited(module) -> None:
    label = {r.path: r for r in module.field_reads() if r.rule == "label"}
    assert label[("label",)] == FieldRead(("label",), False, _line("label := "), "label", frozenset({"a"}))
    assert label[("fallback",)].tools is None and label[("fallback",)].defaulted


def test_a_syntax_error_names_the_file(tmp_path: Path) -> None:
    assert OPA is not None
    path = tmp_path / "broken.rego"
    path.write_text("package x\n\nallow if {\n", encoding="utf-8")
    with pytest.raises(RegoParseError, match=r"broken\.rego"):
        parse_module(OPA, path)
