"""The property file of ``toolgate policy properties`` (``policies/properties.yaml``): what must
hold for every input the contracts allow.

A file is one YAML (or JSON) document with one member, ``toolgate_properties`` (OPA's tools
load every YAML file of a policy directory as data when they read it as a directory, ``opa
test policies``: under that one key it stays out of every family's way)::

    toolgate_properties:
      version: 1
      examples: 200                    # generated inputs per property (default 200)
      values:                          # boundary values of input members, by member name
        currency: [EUR, USD]
      properties:
        - name: large_transfer_needs_a_person      # snake_case, unique
          description: a transfer over 10000 is never allowed without a grant
          tools: [send_money, schedule_transaction] # names; or "all" / "mutating" / "read_only"
          except_tools: []                          # names taken out of the selection
          roles: [[account_holder]]                 # role sets (default: no role, each role alone)
          tenants: [bank-demo]                      # tenant ids (default: every tenant folder, one without data)
          approval: absent                          # absent | present | any (default any)
          session: {labels: [private_data], trusted_counterparties: []}  # drawn from, in subsets
          when: input.call.input.amount > 10000     # Rego expressions, one per line: the premise
          never: [allow]                            # decisions that must not happen
          only: [deny]                              # or: the decisions allowed
          never_rules: [toolgate.no_family]         # or: rule ids that must not match

A tenant entry is an id (its data as the policy directory has it, ``{}`` when it has none) or
``{id: ..., data: {...}}`` (the tenant data to evaluate with, laid over the policies). At least
one of ``never``, ``only``, ``never_rules`` is required. ``PropertyFileError`` says what is
wrong with a file, with the JSON path of each problem.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from app.vocabulary import DecisionWord

#: The tool selectors besides a list of names.
TOOL_SELECTORS = ("all", "mutating", "read_only")
DEFAULT_EXAMPLES = 200
_NAME = r"^[a-z][a-z0-9_]{0,62}$"


class PropertyFileError(ValueError):
    """A property file that cannot be read or is not valid; the message says where and why."""


class TenantSpec(BaseModel):
    """A generated tenant: its id and the data it is evaluated with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
    data: dict[str, Any] | None = None


class SessionSpec(BaseModel):
    """What ``input.session`` is drawn from: subsets of these labels and trusted counterparties."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    labels: list[str] = []
    trusted_counterparties: list[str] = []


class PropertySpec(BaseModel):
    """One property (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=_NAME)
    description: str = ""
    tools: Literal["all", "mutating", "read_only"] | list[str] = "all"
    except_tools: list[str] = []
    roles: list[list[str]] | None = None
    tenants: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")] | TenantSpec] | None = None
    approval: Literal["absent", "present", "any"] = "any"
    session: SessionSpec | None = None
    when: str | None = None
    never: list[DecisionWord] = []
    only: list[DecisionWord] = []
    never_rules: list[str] = []
    examples: int | None = Field(default=None, ge=1, le=100_000)

    @model_validator(mode="after")
    def _expects_something(self) -> PropertySpec:
        if not (self.never or self.only or self.never_rules):
            raise ValueError("a property needs at least one of never, only, never_rules")
        return self

    def premise_lines(self) -> list[str]:
        """The ``when`` expressions, one per non-empty line."""
        return [line.strip() for line in (self.when or "").splitlines() if line.strip()]


class PropertyFile(BaseModel):
    """A property file's ``toolgate_properties`` document."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: Literal[1]
    examples: int = Field(default=DEFAULT_EXAMPLES, ge=1, le=100_000)
    values: dict[str, list[Any]] = {}
    properties: list[PropertySpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_names(self) -> PropertyFile:
        names = [p.name for p in self.properties]
        doubled = sorted({n for n in names if names.count(n) > 1})
        if doubled:
            raise ValueError(f"property names must be unique: {', '.join(doubled)}")
        return self


def read_property_file(path: Path) -> PropertyFile:
    """The property file at ``path``. Raises ``PropertyFileError``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PropertyFileError(f"cannot read {path}: {exc.strerror}") from None
    try:
        document = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise PropertyFileError(f"{path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from None
    if not isinstance(document, dict) or set(document) != {"toolgate_properties"}:
        raise PropertyFileError(f"{path}: the document must have one member, toolgate_properties")
    try:
        return PropertyFile.model_validate(document["toolgate_properties"])
    except ValidationError as exc:
        problems = "; ".join(
            f"/toolgate_properties/{'/'.join(str(p) for p in error['loc'])}: {error['msg']}"
            for error in exc.errors(include_input=False)
        )
        raise PropertyFileError(f"{path}: {problems}") from None
