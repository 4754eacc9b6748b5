"""The OpenID AuthZEN interop's Todo scenario (tests/data/authzen-interop): every request of the
1.0 decision files sent as the interop's Todo backend (the PEP) sends it, with one PEP
credential for every user, and every answer compared as the interop's runner compares it
(``JSON.stringify`` of the expected value against ``answer.decision || false`` or
``answer.evaluations || []``). Decided by the real embedded engine with the example policy of
examples/authzen-todo; the PEP's token has the role named by ``TOOLGATE_AUTHZEN_PEP_ROLE``, and
the deployment answers without ``context`` (``TOOLGATE_AUTHZEN_DECISION_CONTEXT=false``), as an
exact comparison needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.policy.testing import run_policy_tests
from app.settings import PROJECT_ROOT
from tests.support.calls import auth

INTEROP = Path(__file__).resolve().parent.parent / "data" / "authzen-interop"
EXAMPLE = PROJECT_ROOT / "examples" / "authzen-todo"
FILES = ("decisions-authorization-api-1_0-01.json", "decisions-authorization-api-1_0-02.json")
PEP_ROLE = "authzen_pep"


def stringify(value: Any) -> str:
    """``JSON.stringify`` of a JSON value parsed from a response or a file (members in order)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def run_interop(client, cases: dict[str, list[dict[str, Any]]], authorization: dict[str, str]) -> list[str]:
    """The runner's results, one ``PASS``/``FAIL`` line per request, endpoint by endpoint."""
    results = []
    for endpoint in ("evaluation", "evaluations"):
        for case in cases.get(endpoint, []):
            data = client.post(f"/access/v1/{endpoint}", json=case["request"], headers=authorization).get_json()
            answer = (data.get("decision") or False) if endpoint == "evaluation" else (data.get("evaluations") or [])
            status = "PASS" if stringify(case["expected"]) == stringify(answer) else "FAIL"
            results.append(f"{status} {endpoint} {stringify(case['request'])} -> {stringify(data)}")
    return results


@pytest.fixture
def pep_client(make_app):
    return make_app(
        policy_dir=EXAMPLE / "policies", contracts_dir=EXAMPLE / "contracts",
        authzen_pep_role=PEP_ROLE, authzen_decision_context=False,
    ).test_client()


@pytest.mark.parametrize("name", FILES)
def test_the_interop_decisions_pass_as_the_runner_compares_them(pep_client, name) -> None:
    cases = json.loads((INTEROP / name).read_text())
    results = run_interop(pep_client, cases, auth("todo-backend", tenant="todo", roles=[PEP_ROLE]))
    failed = [line for line in results if not line.startswith("PASS")]
    print(f"\nauthzen interop {name}: {len(results) - len(failed)} of {len(results)} pass")
    assert len(results) == (40 if name.endswith("01.json") else 43)
    assert failed == []


def test_each_evaluation_is_recorded_for_the_asserted_user_as_asserted_by_the_pep(pep_client) -> None:
    cases = json.loads((INTEROP / FILES[1]).read_text())["evaluations"][:1]
    run_interop(pep_client, {"evaluations": cases}, auth("todo-backend", tenant="todo", roles=[PEP_ROLE]))
    records = pep_client.get("/v1/decisions?event=decide_dry_run",
                             headers=auth("aud-1", tenant="todo", roles=["auditor"])).get_json()["records"]
    assert [(r["subject_id"], r["tenant"], r["decision"]) for r in records] == [
        ("CiRmZDA2MTRkMy1jMzlhLTQ3ODEtYjdiZC04Yjk2ZjVhNTEwMGQSBWxvY2Fs", "todo", "allow")] * 2
    assert {r["policy_input"]["subject"]["asserted_by"] for r in records} == {"todo-backend"}


def test_the_example_policys_own_rego_tests_pass() -> None:
    report = run_policy_tests(EXAMPLE / "policies")
    assert report.ok and len(report.results) == 5, report.format_text()
