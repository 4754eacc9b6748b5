"""The policy inputs ``toolgate policy properties`` tries: hypothesis strategies built from the
tool contracts' JSON Schemas (hypothesis-jsonschema) and from what the policies declare.

A generated input has the DESIGN §3 shape, as the gateway builds it: a subject (a role set and a
tenant of the property, or the defaults: no role, each role of ``data.roles`` alone; every tenant
folder and one tenant without data), a registered tool with its contract's facts, ``call.input``
drawn from the contract's input schema and normalized by the contract (an input the contract
refuses is never tried), ``approval`` absent or a verified grant, ``session`` with labels and
trusted counterparties drawn from the property's ``session``.

Each input member is drawn from its schema or from **boundary values**: the numbers of the
property's premise and of the tenants' limits, and the schema's own bounds, each with its
neighbours (``x``, ``x +- 0.01``, ``x +- 1``, ``10 x``), the identifiers of the tenants' data (payees,
domains, contacts), the strings of the premise and the property file's ``values`` for the
member's name, kept when the member's schema accepts them.
Optional members are drawn absent and present. Hypothesis shrinks a failing input to a minimal
one: boundary values before schema-drawn ones, fewer optional members.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from app.contracts.contract import ToolContract
from app.errors import ValidationFailed
from app.policy.bundle import PolicyBundle, PolicyLoadError
from app.policy.property_spec import PropertySpec, TenantSpec
from app.policy.tenant_data import DATA_FILE

#: The tenant of generated inputs that has no data in the policies.
TENANT_WITHOUT_DATA = "tenant-without-data"
#: The session windows the gateway reports (docs/session.md).
_WINDOWS = {"1m": 60, "1h": 3600, "24h": 86400}
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
#: String formats hypothesis-jsonschema does not know.
_FORMATS: dict[str, st.SearchStrategy[str]] = {"uuid": st.uuids().map(str)}


@dataclass(frozen=True)
class PolicyWorld:
    """What generation reads from the policies and contracts: the registered contracts, the
    role names of ``data.roles``, every tenant's data by id."""

    contracts: tuple[ToolContract, ...]
    roles: tuple[str, ...]
    tenants: dict[str, dict[str, Any]]

    @classmethod
    def read(cls, bundle: PolicyBundle, contracts: Iterable[ToolContract]) -> PolicyWorld:
        """The world of ``bundle`` (its root ``data.json`` roles, its ``tenants/<id>/data.json``
        files) and ``contracts``. Raises ``PolicyLoadError`` for a data file that is not JSON."""
        def data(path: str) -> dict[str, Any]:
            try:
                value = json.loads(bundle.files[path])
            except ValueError as exc:
                raise PolicyLoadError(f"{path} is not JSON: {exc}") from None
            return value if isinstance(value, dict) else {}

        roles = data(DATA_FILE).get("roles") if DATA_FILE in bundle.files else None
        tenants = {path.split("/")[1]: data(path) for path in bundle.files
                   if path.startswith("tenants/") and path.count("/") == 2 and path.endswith("/" + DATA_FILE)}
        return cls(tuple(contracts), tuple(sorted(roles)) if isinstance(roles, dict) else (), dict(sorted(tenants.items())))


@dataclass(frozen=True)
class GeneratedCall:
    """One generated policy input, and the tenant data it is evaluated with when the property
    declares it (``tenant`` id and data), else None."""

    policy_input: dict[str, Any]
    tenant_data: tuple[str, dict[str, Any]] | None


def select_contracts(spec: PropertySpec, world: PolicyWorld) -> list[ToolContract]:
    """The contracts a property ranges over (``tools`` minus ``except_tools``), sorted."""
    if spec.tools == "all":
        chosen = list(world.contracts)
    elif spec.tools == "mutating":
        chosen = [c for c in world.contracts if c.meta.mutating]
    elif spec.tools == "read_only":
        chosen = [c for c in world.contracts if not c.meta.mutating]
    else:
        chosen = [c for c in world.contracts if c.qualified_name in spec.tools]
    return [c for c in chosen if c.qualified_name not in spec.except_tools]


def tool_document(contract: ToolContract) -> dict[str, Any]:
    """``input.tool`` of a call of ``contract`` (a registered tool)."""
    meta = contract.meta
    return {"name": meta.name, "version": meta.version, "namespace": meta.namespace, "registered": True,
            "mutating": meta.mutating, "risk": meta.risk, "output_labels": list(meta.output_labels)}


def empty_session(labels: Sequence[str] = (), trusted: Sequence[str] = ()) -> dict[str, Any]:
    """``input.session`` of a subject with no earlier calls, with ``labels`` and ``trusted``
    counterparties in the conversation."""
    def aggregate() -> dict[str, Any]:
        return {"calls": {w: {} for w in _WINDOWS}, "denied": {w: {} for w in _WINDOWS},
                "amounts": {w: {} for w in _WINDOWS}, "counterparties": {w: [] for w in _WINDOWS},
                "approved_tools": [], "resources": {"read": [], "written": []}, "labels": [],
                "trusted_counterparties": []}

    conversation = {**aggregate(), "id": "property-conversation", "labels": sorted(labels),
                    "trusted_counterparties": sorted(trusted)}
    return {"windows": dict(_WINDOWS), "conversation": conversation, "subject": aggregate(), "recent": [],
            "truncated": False}


def grant(roles: Sequence[str]) -> dict[str, Any]:
    """``input.approval`` of a verified grant by an approver holding ``roles``."""
    return {"approval_id": "ap_" + "A" * 32, "approved": True, "approver": {"id": "property-approver", "roles": list(roles)},
            "approvers": ["property-approver"]}


def _strings_in(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings_in(item)


def _numbers_in(value: Any) -> Iterable[float]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _numbers_in(item)


@dataclass(frozen=True)
class BoundaryHints:
    """Where boundary values come from: the premise's number and string literals (``premise``)
    and the tenants' limits and identifiers (``data``); numbers are widened to their
    neighbours. Each is its own branch of a member's strategy, so that the premise's values
    are drawn often."""

    premise_numbers: tuple[float, ...]
    premise_strings: tuple[str, ...]
    data_numbers: tuple[float, ...]
    data_strings: tuple[str, ...]

    @classmethod
    def of(cls, spec: PropertySpec, tenants: Iterable[dict[str, Any]]) -> BoundaryHints:
        premise = spec.when or ""
        numbers: set[float] = set()
        strings: set[str] = set()
        for data in tenants:
            numbers.update(_numbers_in(data.get("limits") or {}))
            strings.update(_strings_in({k: v for k, v in data.items() if k != "limits"}))
        return cls(tuple(sorted({float(n) for n in _NUMBER.findall(premise)})),
                   tuple(sorted({json.loads(f'"{s}"') for s in _STRING.findall(premise)})),
                   tuple(sorted(numbers)), tuple(sorted(strings)))


def _neighbours(numbers: Iterable[float]) -> list[float]:
    values = [v for n in numbers for v in (n, n + 0.01, n - 0.01, n + 1, n - 1, n * 10)]
    return [int(v) if float(v).is_integer() else round(v, 6) for v in values]


def _schema_bounds(schema: dict[str, Any]) -> list[float]:
    found = [schema[k] for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
             if isinstance(schema.get(k), int | float) and not isinstance(schema.get(k), bool)]
    return [*found, 0, 1]


def _member_strategy(schema: dict[str, Any], hints: BoundaryHints, declared: list[Any]) -> st.SearchStrategy[Any]:
    """A member's values: the premise's boundary values (and the file's ``values`` for it), the
    data's and the schema's (those its schema accepts), and values drawn from its schema."""
    validator = jsonschema.Draft202012Validator(schema)
    premise = [*declared, *_neighbours(hints.premise_numbers), *hints.premise_strings]
    data = [*_neighbours([*hints.data_numbers, *_schema_bounds(schema)]), *hints.data_strings]
    branches: list[st.SearchStrategy[Any]] = []
    for candidates in (premise, data):
        valid = list(dict.fromkeys(v for v in candidates if validator.is_valid(v)))
        if valid:
            branches.append(st.sampled_from(valid))
    return st.one_of(*branches, from_schema(schema, custom_formats=_FORMATS))


def contract_inputs(contract: ToolContract, hints: BoundaryHints,
                    values: dict[str, list[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Inputs of ``contract`` as the gateway hands them to the policy (validated and
    normalized; one the contract refuses is never drawn). ``values``: boundary values by member
    name (the property file's ``values``)."""
    schema = contract.input_schema
    members = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(members, dict):
        raw: st.SearchStrategy[Any] = from_schema(schema, custom_formats=_FORMATS)
    else:
        shared: dict[str, Any] = {k: schema[k] for k in ("$defs", "definitions") if k in schema}
        required = set(schema.get("required") or ())
        strategies = {name: _member_strategy({**shared, **sub}, hints, values.get(name, []))
                      for name, sub in members.items() if isinstance(sub, dict)}
        raw = st.fixed_dictionaries({k: v for k, v in strategies.items() if k in required},
                                    optional={k: v for k, v in strategies.items() if k not in required})

    def normalized(value: Any) -> dict[str, Any] | None:
        try:
            return contract.validate_input(value)
        except ValidationFailed:
            return None

    return raw.map(normalized).filter(lambda value: value is not None)  # type: ignore[return-value]


def policy_inputs(spec: PropertySpec, world: PolicyWorld, contract: ToolContract,
                  values: dict[str, list[Any]] | None = None) -> st.SearchStrategy[GeneratedCall]:
    """The inputs a property is checked on for calls of ``contract`` (one of
    ``select_contracts``; see the module docstring); ``values``: boundary values by input member
    name."""
    tenants: list[str | TenantSpec] = list(spec.tenants) if spec.tenants else [*sorted(world.tenants), TENANT_WITHOUT_DATA]
    tenant_data = [t.data or {} if isinstance(t, TenantSpec) else world.tenants.get(t, {}) for t in tenants]
    hints = BoundaryHints.of(spec, tenant_data)
    call_inputs = contract_inputs(contract, hints, values or {})
    role_sets = spec.roles if spec.roles is not None else [[], *([role] for role in world.roles)]
    approvals: list[dict[str, Any] | None] = []
    if spec.approval in ("absent", "any"):
        approvals.append(None)
    if spec.approval in ("present", "any"):
        approvals.append(grant(world.roles))
    session = spec.session
    labels = st.lists(st.sampled_from(session.labels), unique=True) if session and session.labels else st.just([])
    trusted = (st.lists(st.sampled_from(session.trusted_counterparties), unique=True)
               if session and session.trusted_counterparties else st.just([]))

    def build(call_input: dict[str, Any], roles: list[str], tenant: str | TenantSpec,
              approval: dict[str, Any] | None, drawn_labels: list[str], drawn_trusted: list[str]) -> GeneratedCall:
        tenant_id = tenant.id if isinstance(tenant, TenantSpec) else tenant
        document = {
            "subject": {"id": "property-subject", "tenant": tenant_id, "roles": list(roles)},
            "tool": tool_document(contract),
            "call": {"id": "property-call", "input": call_input},
            "context": {},
            "history": {},
            "session": empty_session(drawn_labels, drawn_trusted),
            "approval": approval,
            "request": {"id": "property-request", "time": "2026-01-01T00:00:00.000Z"},
        }
        declared = (tenant.id, tenant.data) if isinstance(tenant, TenantSpec) and tenant.data is not None else None
        return GeneratedCall(document, declared)

    return st.builds(build, call_inputs, st.sampled_from(role_sets), st.sampled_from(tenants), st.sampled_from(approvals),
                     labels, trusted)
