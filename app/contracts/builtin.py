"""The tool contracts shipped as pydantic models: the ones that normalize input or need
cross-field rules. JSON-Schema-only contracts live as files under ``contracts/``.

To add one: write the input model (``extra="forbid"``), optionally an output model, and add a
``contract_from_models(...)`` entry to ``BUILTIN_CONTRACTS``.
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Annotated, Any, Literal

import pycountry
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from app.contracts.contract import ContractMetadata, ToolContract
from app.contracts.pydantic_contracts import contract_from_models

_STRICT = ConfigDict(extra="forbid", str_strip_whitespace=False)


def _json_number_only(value: Any) -> Any:
    """Accept a JSON number only (no strings, no booleans), as a Decimal without float noise."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise ValueError("must be a JSON number")
    return Decimal(str(value))


def _decimal_to_json(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


Money = Annotated[
    Decimal,
    BeforeValidator(_json_number_only),
    Field(gt=0, max_digits=15, decimal_places=2),
    PlainSerializer(_decimal_to_json, return_type=int | float),
    # Not multipleOf 0.01: float arithmetic (ajv, jsonschema) says 19.99 is no multiple of it.
    WithJsonSchema({"type": "number", "exclusiveMinimum": 0, "x-decimal-places": 2}),
]
TrimmedTitle = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=120)]
TrimmedText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=5000)]


class CreateTicketInput(BaseModel):
    """createTicket v1: title and description are trimmed; priority defaults to normal."""

    model_config = _STRICT

    title: TrimmedTitle
    description: TrimmedText
    priority: Literal["low", "normal", "high"] = "normal"
    clientMutationId: uuid.UUID = Field(description="Client-chosen UUID; serves as the idempotency key.")

    @field_validator("clientMutationId", mode="before")
    @classmethod
    def _uuid_string(cls, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError("must be a UUID string")
        return value


class CreateTicketOutput(BaseModel):
    """The ticket the tool service created."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=128)
    title: str = Field(min_length=1, max_length=120)
    status: Literal["open", "closed"]
    priority: Literal["low", "normal", "high"]


class ProcessPaymentInput(BaseModel):
    """processPayment v1: amount > 0 with at most 2 decimals, ISO 4217 currency, recipient."""

    model_config = _STRICT

    amount: Money
    currency: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
    recipient: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")]

    @field_validator("currency")
    @classmethod
    def _iso_4217(cls, value: str) -> str:
        if pycountry.currencies.get(alpha_3=value) is None:
            raise ValueError("must be an ISO 4217 currency code")
        return value


class ExportReportInput(BaseModel):
    """exportReport v1: a date range with start_date <= end_date (cross-field rule)."""

    model_config = _STRICT

    start_date: dt.date
    end_date: dt.date

    @field_validator("start_date", "end_date", mode="before")
    @classmethod
    def _iso_date_string(cls, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError("must be a date string YYYY-MM-DD")
        return value

    @model_validator(mode="after")
    def _ordered(self) -> ExportReportInput:
        if self.start_date > self.end_date:
            raise ValueError("start_date must not be after end_date")
        return self


BUILTIN_CONTRACTS: list[ToolContract] = [
    contract_from_models(
        ContractMetadata(
            name="createTicket",
            version="1",
            description="Create a support ticket.",
            mutating=True,
            risk="low",
            retry_safe=False,
            idempotency_key_field="clientMutationId",
        ),
        CreateTicketInput,
        CreateTicketOutput,
        "app.contracts.builtin:CreateTicketInput",
    ),
    contract_from_models(
        ContractMetadata(
            name="processPayment",
            version="1",
            description="Pay an amount to a recipient.",
            mutating=True,
            risk="high",
            retry_safe=False,
            amount_fields=("/amount",),
            counterparty_fields=("/recipient",),
            output_labels=("external_comms",),
        ),
        ProcessPaymentInput,
        None,
        "app.contracts.builtin:ProcessPaymentInput",
    ),
    contract_from_models(
        ContractMetadata(
            name="exportReport",
            version="1",
            description="Export the activity report for a date range.",
            mutating=False,
            risk="medium",
            retry_safe=True,
        ),
        ExportReportInput,
        None,
        "app.contracts.builtin:ExportReportInput",
    ),
]
