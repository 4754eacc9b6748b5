"""The one home of each shared fact: time formats, vocabularies, the algorithm table, settings
sections."""

from __future__ import annotations

import datetime as dt

import pytest

from app import timefmt
from app.jwa import ALG_FAMILY, SUPPORTED_ALGORITHMS
from app.models import DecideResponse, DecisionRecord
from app.settings import SECTIONS, Settings
from app.vocabulary import AI_SDK_STATUSES, DECISIONS, EVENT_TYPES


def test_millisecond_and_microsecond_forms_round_trip() -> None:
    assert timefmt.rfc3339_ms(1_700_000_000_123) == "2023-11-14T22:13:20.123Z"
    moment = dt.datetime(2025, 1, 31, 12, 0, 0, 123456, tzinfo=dt.UTC)
    assert timefmt.format_us(moment) == "2025-01-31T12:00:00.123456Z"
    assert timefmt.parse_us(timefmt.format_us(moment)) == moment
    assert timefmt.from_epoch_us(timefmt.epoch_us(moment)) == moment


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-01-31T12:00:00Z", "2025-01-31T12:00:00+00:00"),
        ("2025-01-31t13:00:00.5+01:00", "2025-01-31T12:00:00.500000+00:00"),
        ("2016-12-31T23:59:60Z", "2016-12-31T23:59:59+00:00"),
    ],
)
def test_rfc3339_input_is_read_to_utc(text: str, expected: str) -> None:
    assert timefmt.parse_rfc3339(text).isoformat() == expected


@pytest.mark.parametrize("text", ["2025-01-31", "2025-01-31T12:00:00", "2025-13-01T00:00:00Z", "yesterday"])
def test_rfc3339_without_an_offset_or_out_of_range_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        timefmt.parse_rfc3339(text)
    assert timefmt.parse_date_or_rfc3339("2025-01-31") == dt.datetime(2025, 1, 31, tzinfo=dt.UTC)


def test_every_algorithm_the_verifier_implements_is_accepted_by_settings() -> None:
    assert set(ALG_FAMILY) | {"HS256"} == SUPPORTED_ALGORITHMS
    assert Settings(jwt_algorithms=sorted(SUPPORTED_ALGORITHMS)).jwt_algorithms == sorted(SUPPORTED_ALGORITHMS)


def test_the_published_models_use_the_vocabulary() -> None:
    schema = DecideResponse.model_json_schema()
    assert set(schema["properties"]["decision"]["enum"]) == set(DECISIONS)
    record = DecisionRecord.model_json_schema()
    assert set(record["properties"]["event"]["enum"]) == set(EVENT_TYPES)
    statuses = record["properties"]["ai_sdk_status"]["anyOf"][0]["enum"]
    assert set(statuses) == set(AI_SDK_STATUSES)


def test_every_setting_belongs_to_a_section_that_settings_extends() -> None:
    for section in SECTIONS:
        assert issubclass(Settings, section)
    fields = {name for section in SECTIONS for name in section.model_fields}
    assert fields == set(Settings.model_fields)


def test_a_mistyped_setting_is_named_with_the_one_it_meant(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from app.settings import load_settings, unknown_variables

    assert unknown_variables({"TOOLGATE_REDIS_URI": "x", "TOOLGATE_REDIS_URL": "y", "TOOLGATE_NOTHING_LIKE_IT": "z",
                              "PATH": "/bin"}) == ["TOOLGATE_NOTHING_LIKE_IT", "TOOLGATE_REDIS_URI (did you mean TOOLGATE_REDIS_URL?)"]
    monkeypatch.setenv("TOOLGATE_IDEMPOTENCY_LEASE_SECONDS", "5")
    with caplog.at_level("WARNING"):
        load_settings()
    assert "unknown setting TOOLGATE_IDEMPOTENCY_LEASE_SECONDS (did you mean TOOLGATE_IDEMPOTENCY_LEASE_S?) is ignored" in caplog.text
