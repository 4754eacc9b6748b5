"""``toolgate policy properties``: check that properties (``app.policy.property_spec``) hold for
every input the contracts allow, on the real engine.

Each property is checked with hypothesis on inputs from ``app.policy.property_inputs``,
evaluated by the embedded OPA engine on the policy bundle without its tests (as ``policy eval``
and the gateway evaluate), the decision normalized as the gateway normalizes it (an undefined or
malformed result is the gateway's fail-closed deny). The premise (``when``) is a Rego module
beside the policies, ``package toolgate_properties.<name>`` with one rule ``applies``; an input
where it does not hold counts for nothing. When a property fails, hypothesis shrinks the input
to a minimal counterexample, printed as a Rego test ready to paste into a ``*_test.rego`` file.

A property **fails** when the decision of an input where its premise holds is in ``never``, not
in ``only``, or matches a rule of ``never_rules``, or when the policy raises an error on it (the
gateway answers 503: a policy bug either way); it is **vacuous** when its premise held for no
generated input (a property that checks nothing is a failure too). Runs are reproducible:
derandomized unless a ``seed`` is given.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Unsatisfiable

from app.engine.base import normalize
from app.models import PolicyDecision
from app.policy.bundle import PolicyBundle, PolicyLoadError, load_into
from app.policy.property_inputs import GeneratedCall, PolicyWorld, policy_inputs, select_contracts
from app.policy.property_spec import PropertyFile, PropertySpec
from app.policy.tenant_data import DATA_FILE

_PACKAGE = "toolgate_properties"
#: The fewest generated inputs each tool of a property gets.
MIN_EXAMPLES_PER_TOOL = 10


@dataclass(frozen=True)
class Counterexample:
    """A generated call the property fails on, the decision it got and what is wrong."""

    call: GeneratedCall
    decision: PolicyDecision
    problem: str

    def as_json(self) -> dict[str, Any]:
        return {"input": self.call.policy_input,
                "tenant_data": dict([self.call.tenant_data]) if self.call.tenant_data else None,
                "decision": self.decision.decision, "matched_rules": [r.id for r in self.decision.matched_rules],
                "problem": self.problem}


@dataclass
class PropertyResult:
    """The outcome of one property: ``examples`` generated, ``premise_held`` of them checked,
    the shrunk ``counterexample`` when it fails, ``error`` when it could not be checked."""

    spec: PropertySpec
    examples: int = 0
    premise_held: int = 0
    seconds: float = 0.0
    counterexample: Counterexample | None = None
    error: str | None = None

    @property
    def status(self) -> str:
        """``holds``, ``fails``, ``vacuous`` (the premise never held) or ``error``."""
        if self.error is not None:
            return "error"
        if self.counterexample is not None:
            return "fails"
        return "holds" if self.premise_held else "vacuous"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.spec.name, "status": self.status, "examples": self.examples,
                "premise_held": self.premise_held, "seconds": round(self.seconds, 3), "error": self.error,
                "counterexample": self.counterexample.as_json() if self.counterexample else None,
                "rego_test": rego_test(self.spec, self.counterexample) if self.counterexample else None}


class _Violation(Exception):
    """Raised inside a hypothesis run for an input the property fails on."""


def _premise_module(spec: PropertySpec) -> str:
    body = "\n".join(f"\t{line}" for line in spec.premise_lines()) or "\ttrue"
    return f"package {_PACKAGE}.{spec.name}\n\napplies if {{\n{body}\n}}\n"


def _problem(spec: PropertySpec, decision: PolicyDecision) -> str | None:
    """What is wrong with ``decision`` under ``spec``, or None when it is fine."""
    if decision.decision in spec.never:
        return f"decision {decision.decision}, which the property never allows"
    if spec.only and decision.decision not in spec.only:
        return f"decision {decision.decision}, not one of {', '.join(spec.only)}"
    matched = sorted({r.id for r in decision.matched_rules} & set(spec.never_rules))
    if matched:
        return f"rule {', '.join(matched)} matched"
    return None


class _PropertyEngine:
    """The bundle (without tests), the property's premise module and the tenant data it
    declares, in one embedded engine. Raises ``PolicyLoadError``; ``close()`` it."""

    def __init__(self, bundle: PolicyBundle, spec: PropertySpec, decision_path: str) -> None:
        from opa_bindings import OpaEngine

        files = {p: raw for p, raw in bundle.files.items() if not p.endswith("_test.rego")}
        files[f"{_PACKAGE}/{spec.name}.rego"] = _premise_module(spec).encode()
        for tenant in spec.tenants or ():
            if not isinstance(tenant, str) and tenant.data is not None:
                files[f"tenants/{tenant.id}/{DATA_FILE}"] = json.dumps(tenant.data).encode()
        self._bundle = PolicyBundle(files=files, revision=bundle.revision, source=bundle.source)
        self._decision = decision_path.replace("/", ".")
        self._premise = f"{_PACKAGE}.{spec.name}.applies" if spec.premise_lines() else None
        self._engine = OpaEngine()
        try:
            load_into(self._engine, self._bundle)
        except PolicyLoadError:
            self._engine.close()
            raise

    def applies(self, policy_input: dict[str, Any]) -> bool:
        from opa_bindings import OpaError, OpaUndefinedError

        if self._premise is None:
            return True
        try:
            return self._engine.eval_document(self._premise, policy_input) is True
        except OpaUndefinedError:
            return False
        except OpaError:
            return False  # a premise that raises does not hold

    def decide(self, policy_input: dict[str, Any]) -> tuple[PolicyDecision, str | None]:
        """The gateway's decision and, when the policy raised, the error."""
        from opa_bindings import OpaError, OpaUndefinedError

        try:
            document, defined, raised = self._engine.eval_document(self._decision, policy_input), True, None
        except OpaUndefinedError:
            document, defined, raised = None, False, None
        except OpaError as exc:
            document, defined, raised = None, False, f"the policy raised an error: {exc.message}"
        return normalize(document, defined=defined, policy_revision=self._bundle.revision), raised

    def close(self) -> None:
        self._engine.close()


def check_property(spec: PropertySpec, bundle: PolicyBundle, world: PolicyWorld, *, examples: int,
                   values: dict[str, list[Any]] | None = None, decision_path: str = "toolgate/decision",
                   seed: int | None = None) -> PropertyResult:
    """Check one property on ``examples`` generated inputs, shared out among its tools (each
    tool gets at least ``MIN_EXAMPLES_PER_TOOL``, so that none is left untried), until one
    fails (see the module docstring); ``values``: boundary values by input member name."""
    result = PropertyResult(spec)
    started = time.monotonic()
    contracts = select_contracts(spec, world)
    if not contracts:
        result.error = f"property {spec.name}: its tools name no contract"
        return result
    try:
        engine = _PropertyEngine(bundle, spec, decision_path)
    except PolicyLoadError as exc:
        result.error = str(exc)
        return result
    found: list[Counterexample] = []
    counts = {"examples": 0, "held": 0}

    def run(call: GeneratedCall) -> None:
        counts["examples"] += 1
        if not engine.applies(call.policy_input):
            return
        counts["held"] += 1
        decision, raised = engine.decide(call.policy_input)
        problem = raised or _problem(spec, decision)
        if problem is not None:
            found.append(Counterexample(call, decision, problem))
            raise _Violation(problem)

    per_tool = max(MIN_EXAMPLES_PER_TOOL, -(-examples // len(contracts)))
    try:
        for contract in contracts:
            test = settings(max_examples=per_tool, database=None, deadline=None, derandomize=seed is None,
                            report_multiple_bugs=False, print_blob=False, suppress_health_check=list(HealthCheck),
                            phases=[Phase.explicit, Phase.generate, Phase.shrink],
                            )(given(policy_inputs(spec, world, contract, values))(run))
            if seed is not None:
                test = hypothesis_seed(seed)(test)
            try:
                test()
            except Unsatisfiable:
                result.error = f"no input of {contract.qualified_name} that its contract accepts could be generated"
                break
    except _Violation:
        result.counterexample = found[-1]  # hypothesis runs the shrunk example last
    finally:
        engine.close()
    result.examples, result.premise_held = counts["examples"], counts["held"]
    result.seconds = time.monotonic() - started
    return result


def check_properties(properties: PropertyFile, bundle: PolicyBundle, world: PolicyWorld, *,
                     examples: int | None = None, decision_path: str = "toolgate/decision",
                     seed: int | None = None) -> list[PropertyResult]:
    """Check every property of the file; ``examples`` overrides the file's counts."""
    return [check_property(spec, bundle, world, examples=examples or spec.examples or properties.examples,
                           values=properties.values, decision_path=decision_path, seed=seed)
            for spec in properties.properties]


def _rego_value(value: Any, indent: str) -> str:
    """``value`` as a Rego term (JSON is one): an object one member a line, each member's value
    on that line, indented to sit at ``indent``."""
    if not isinstance(value, dict) or not value:
        return json.dumps(value, sort_keys=True)
    members = [f"{indent}\t{json.dumps(k)}: {json.dumps(v, sort_keys=True)}," for k, v in sorted(value.items())]
    return "{\n" + "\n".join(members) + f"\n{indent}}}"


def rego_test(spec: PropertySpec, found: Counterexample) -> str:
    """The counterexample as a Rego test that passes once the policy satisfies the property."""
    tenant = ""
    if found.call.tenant_data is not None:
        tenant_id, data = found.call.tenant_data
        tenant = f"\n\t\twith data.tenants[{json.dumps(tenant_id)}] as {_rego_value(data, chr(9) * 2)}"
    checks = []
    if spec.never:
        checks.append(f"\tnot decision.decision in {_rego_set(spec.never)}")
    if spec.only:
        checks.append(f"\tdecision.decision in {_rego_set(spec.only)}")
    if spec.never_rules:
        checks.append("\tmatched := {rule.id | some rule in decision.matched_rules}")
        checks.append(f"\tcount(matched & {_rego_set(spec.never_rules)}) == 0")
    rules = ", ".join(r.id for r in found.decision.matched_rules) or "none"
    lines = [
        f"# property {spec.name}" + (f": {spec.description}" if spec.description else ""),
        f"# counterexample (toolgate policy properties): {found.problem}; matched rules: {rules}",
        f"test_property_{spec.name}_counterexample if {{",
        f"\tdecision := data.toolgate.decision with input as {_rego_value(found.call.policy_input, chr(9))}{tenant}",
        *checks,
        "}",
    ]
    return "\n".join(lines)


def _rego_set(values: Sequence[str]) -> str:
    return "{" + ", ".join(json.dumps(v) for v in values) + "}"


def format_results(results: list[PropertyResult]) -> str:
    """One line per property, then each counterexample's Rego test, then a summary line."""
    lines = []
    for r in results:
        what = {"holds": "holds", "fails": "FAILS", "vacuous": "VACUOUS (its premise never held)",
                "error": f"ERROR: {r.error}"}[r.status]
        lines.append(f"{r.spec.name:<44} {what:<8} {r.premise_held:>5}/{r.examples:<5} inputs  {r.seconds:6.1f} s")
    for r in results:
        if r.counterexample is not None:
            lines += ["", f"{r.spec.name}: {r.counterexample.problem}; the shrunk counterexample as a Rego test:", "",
                      rego_test(r.spec, r.counterexample)]
    failed = sum(r.status != "holds" for r in results)
    lines += ["", f"policy properties: {len(results) - failed} hold, {failed} fail"
              f" ({sum(r.examples for r in results)} inputs, {sum(r.seconds for r in results):.1f} s)"]
    return "\n".join(lines)
