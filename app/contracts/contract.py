"""One tool contract: its metadata and its validators (``ToolContract``).

``validate_input(data) -> dict`` returns the normalized input or raises ``ValidationFailed``
(HTTP 422) whose ``details.problems`` lists ``{path, message}`` with ``path`` a JSON Pointer
(RFC 6901). ``validate_output(result)`` does the same for a tool result when the contract has
an output schema.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.errors import ContractMismatch
from app.vocabulary import LABEL_PATTERN, NAMESPACE_PATTERN, TOOL_NAME_PATTERN, VERSION_PATTERN, qualified_tool

Risk = Literal["low", "medium", "high"]
Pointer = Annotated[str, StringConstraints(pattern=r"^(/[^/]*)+$", max_length=512)]
Label = Annotated[str, StringConstraints(pattern=LABEL_PATTERN)]
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
Problem = dict[str, str]
Validate = Callable[[Any], Any]
#: At most this many problems are listed in one error.
MAX_PROBLEMS = 50


class ContractLoadError(ValueError):
    """A contract file or model is invalid. The message names the file and the problem."""


class ContractMetadata(BaseModel):
    """The metadata every contract carries, whatever its authoring form."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=TOOL_NAME_PATTERN)
    version: str = Field(pattern=VERSION_PATTERN)
    namespace: str = Field(default="", pattern=NAMESPACE_PATTERN)
    description: str = ""
    mutating: bool
    risk: Risk
    retry_safe: bool = False
    #: An error result of the tool (MCP ``isError``) is an outcome, kept and replayed like a
    #: success; by default it releases the idempotency key, so the call may run again.
    error_results_final: bool = False
    sensitive_paths: tuple[str, ...] = ()
    idempotency_key_field: str | None = None
    lease_s: int | None = Field(default=None, gt=0, le=86_400)
    # The marks the session reads (docs/session.md). Pointers are JSON Pointers (RFC 6901)
    # where a ``*`` segment stands for every item of an array or member of an object.
    #: Numeric input fields summed per window (``input.session.*.amounts``).
    amount_fields: tuple[Pointer, ...] = ()
    #: Input fields naming who the call deals with (``input.session.*.counterparties``).
    counterparty_fields: tuple[Pointer, ...] = ()
    #: Input fields naming what the call reads or writes (``input.session.*.resources``).
    resource_fields: tuple[Pointer, ...] = ()
    #: What a reported result brings into the session (``input.session.*.labels``), e.g.
    #: ``untrusted_content``, ``private_data``, ``external_comms``; also ``input.tool.output_labels``.
    output_labels: tuple[Label, ...] = ()
    #: Result fields naming counterparties; from a result without ``untrusted_content`` they
    #: become ``input.session.*.trusted_counterparties``.
    output_counterparty_fields: tuple[Pointer, ...] = ()


@dataclass(frozen=True)
class ToolContract:
    """One registered tool contract (see the module docstring)."""

    meta: ContractMetadata
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    source: str
    _validate_input: Validate = field(repr=False)
    _validate_output: Validate | None = field(repr=False, default=None)
    #: The normalized input holds every top-level property that has a ``default`` in the input
    #: schema, present or not in the call (pydantic contracts); JSON Schema contracts do not
    #: fill defaults (``default`` is an annotation there).
    fills_defaults: bool = False

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def version(self) -> str:
        return self.meta.version

    @property
    def namespace(self) -> str:
        return self.meta.namespace

    def always_present(self) -> frozenset[str]:
        """The top-level input fields every normalized input holds: the schema's ``required``,
        plus the properties with a ``default`` when the contract fills defaults."""
        properties = self.input_schema.get("properties") or {}
        present = {f for f in self.input_schema.get("required") or () if isinstance(f, str)}
        if self.fills_defaults:
            present |= {f for f, s in properties.items() if isinstance(s, dict) and "default" in s}
        return frozenset(present)

    @property
    def qualified_name(self) -> str:
        """``namespace/name`` (``app.vocabulary.qualified_tool``)."""
        return qualified_tool(self.meta.namespace, self.meta.name)

    def validate_input(self, data: Any) -> dict[str, Any]:
        """Validate and normalize tool input. Raises ``ValidationFailed`` (422)."""
        normalized: dict[str, Any] = self._validate_input(data)
        return normalized

    def validate_output(self, result: Any) -> Any:
        """Validate a tool result against the output schema (identity when there is none).

        Raises ``ValidationFailed`` (422).
        """
        if self._validate_output is None:
            return result
        return self._validate_output(result)

    def describe(self) -> dict[str, Any]:
        """The public description served by ``GET /v1/tools``."""
        return {
            **self.meta.model_dump(mode="json"),
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
        }


def pointer(parts: Any) -> str:
    """The JSON Pointer (RFC 6901) of a path of keys and indexes."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def is_sensitive(path: str, sensitive: tuple[str, ...]) -> bool:
    """True when ``path`` is one of ``sensitive`` or inside one."""
    return any(path == s or path.startswith(s + "/") for s in sensitive)


def mismatch(problems: list[Problem], what: str) -> ContractMismatch:
    """The 422 for ``what`` (``input`` or ``result``) failing its schema."""
    return ContractMismatch(
        f"{what} does not match the tool contract",
        http_status=422,
        details={"problems": problems[:MAX_PROBLEMS]},
    )
