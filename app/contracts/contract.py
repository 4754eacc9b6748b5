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

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from app.errors import ContractMismatch
from app.vocabulary import LABEL_PATTERN, NAMESPACE_PATTERN, TOOL_NAME_PATTERN, VERSION_PATTERN, qualified_tool

Risk = Literal["low", "medium", "high"]
Pointer = Annotated[str, StringConstraints(pattern=r"^(/[^/]*)+$", max_length=512)]
#: A result mark's pointer may be ``""``: the whole result (e.g. a tool that returns text).
ResultPointer = Annotated[str, StringConstraints(pattern=r"^(/[^/]*)*$", max_length=512)]
Label = Annotated[str, StringConstraints(pattern=LABEL_PATTERN)]
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: The kinds of values provenance tracks (docs/session.md "Provenance"), each with its own
#: normalization (``app.provenance.normalize``).
ValueKind = Literal["url", "domain", "email", "iban", "phone", "path", "amount"]
Problem = dict[str, str]
Validate = Callable[[Any], Any]
#: At most this many problems are listed in one error.
MAX_PROBLEMS = 50


class ContractLoadError(ValueError):
    """A contract file or model is invalid. The message names the file and the problem."""


class InputMark(BaseModel):
    """What one input field holds, for ``input.provenance``: a value of ``kind`` (compared by
    that kind's normalization), or free text from which the values of the kinds in
    ``extract`` are taken one by one. ``pointer`` may use ``*`` segments."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pointer: Pointer
    kind: ValueKind | None = None
    extract: tuple[ValueKind, ...] = ()

    @model_validator(mode="after")
    def _one_meaning(self) -> InputMark:
        if (self.kind is None) == (not self.extract):
            raise ValueError(f"mark {self.pointer}: name either kind (one value) or extract (free text)")
        return self


class OutputMark(BaseModel):
    """What one result field carries, for provenance: its ``labels`` (none: the contract's
    ``output_labels``), and either the ``kind`` of the one value it holds or the kinds to
    ``extract`` from it as free text (neither: its scalar values are remembered as they are)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pointer: ResultPointer
    labels: tuple[Label, ...] = ()
    kind: ValueKind | None = None
    extract: tuple[ValueKind, ...] = ()

    @model_validator(mode="after")
    def _one_meaning(self) -> OutputMark:
        if self.kind is not None and self.extract:
            raise ValueError(f"mark {self.pointer}: name kind (one value) or extract (free text), not both")
        return self


def _unique_pointers(marks: tuple[InputMark, ...] | tuple[OutputMark, ...], side: str) -> None:
    seen: set[str] = set()
    for mark in marks:
        if mark.pointer in seen:
            raise ValueError(f"{side}: pointer {mark.pointer} is marked twice")
        seen.add(mark.pointer)


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
    # The marks provenance reads (docs/session.md "Provenance"): which values of a reported
    # result are remembered, under which labels, and what the input fields hold.
    #: Result fields with their labels and value kinds. With marks, a reported result is
    #: traced: the values no mark covers are remembered under ``output_labels``; without, only
    #: the labels are known (``untraced_labels``).
    output_fields: tuple[OutputMark, ...] = ()
    #: Input fields with the kind of value they hold or the kinds to extract from free text.
    input_fields: tuple[InputMark, ...] = ()

    @model_validator(mode="after")
    def _marks(self) -> ContractMetadata:
        _unique_pointers(self.output_fields, "output_fields")
        _unique_pointers(self.input_fields, "input_fields")
        unlabelled = [m.pointer for m in self.output_fields if not m.labels and not self.output_labels]
        if unlabelled:
            raise ValueError(f"output_fields: {unlabelled[0]} has no labels and the contract no output_labels")
        return self

    def field_labels(self) -> frozenset[str]:
        """Every label a result of this tool may bring: ``output_labels`` and those of its marks."""
        return frozenset(self.output_labels).union(*(m.labels for m in self.output_fields))


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
