"""The generated settings reference (``app.settings_doc``): docs/settings.md matches the code,
every setting is listed, and no secret value is ever printed. Socket-free."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app import settings_doc
from app.settings import DEV_APPROVAL_KEY, DEV_HS256_SECRET, PROJECT_ROOT, Settings


def test_checked_in_reference_is_current() -> None:
    checked_in = settings_doc.DOC_PATH.read_text(encoding="utf-8")
    assert checked_in == settings_doc.render(), f"docs/settings.md is stale: run {settings_doc.COMMAND}"


def test_check_mode_reports_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "settings.md"
    stale.write_text(settings_doc.render().replace("TOOLGATE_REDIS_URL", "TOOLGATE_REDIS_ADDRESS"))
    monkeypatch.setattr(settings_doc, "DOC_PATH", stale)
    monkeypatch.setattr(settings_doc, "PROJECT_ROOT", tmp_path)
    assert settings_doc.main(["--check"]) == 1
    assert "settings.md is stale" in capsys.readouterr().err
    assert settings_doc.main(["--write"]) == 0
    assert settings_doc.main(["--check"]) == 0


def test_every_setting_has_a_row() -> None:
    text = settings_doc.render()
    for name in Settings.model_fields:
        assert f"| `TOOLGATE_{name.upper()}` |" in text, name


def test_no_secret_or_machine_path_is_printed() -> None:
    text = settings_doc.render()
    for secret in (DEV_HS256_SECRET, DEV_APPROVAL_KEY[1].decode(), "toolgate-development-audit-key-hash-secret"):
        assert secret not in text
    assert str(PROJECT_ROOT) not in text
    assert "| `TOOLGATE_AUDIT_DSN` | string | `var/decisions.sqlite` |" in text


class _Sample(BaseSettings):
    """A settings class shaped like ``Settings``, to pin the rendering rules."""

    model_config = SettingsConfigDict(env_prefix="SAMPLE_", frozen=True)

    mode: Literal["fast", "safe"] = "safe"

    # Limits: how much one call may take
    #: Largest body in bytes;
    #: 413 above.
    max_body_bytes: int = Field(65_536, gt=0, le=1_000_000)
    depth: int = Field(8, description="Deepest nesting | counted from 1.", ge=1)
    undocumented: str | None = None

    # Secrets
    token: SecretStr = SecretStr("do-not-print-me")
    roles: Annotated[list[str], NoDecode] = ["a", "b"]
    name: str = Field("x", min_length=1, max_length=8, pattern=r"^[a-z]+$")


def test_rendering_rules_on_a_sample_class() -> None:
    text = settings_doc.render(_Sample)
    lines = text.splitlines()
    assert "do-not-print-me" not in text
    assert lines.index("## General") < lines.index("## Limits") < lines.index("## Secrets")
    assert "| `SAMPLE_MODE` | `fast` \\| `safe` | `safe` |  |  |" in lines
    assert "| `SAMPLE_MAX_BODY_BYTES` | integer | `65536` | > 0, <= 1000000 | Largest body in bytes; 413 above. |" in lines
    # a description wins over a comment, and a pipe in it cannot break the table
    assert "| `SAMPLE_DEPTH` | integer | `8` | >= 1 | Deepest nesting \\| counted from 1. |" in lines
    assert "| `SAMPLE_UNDOCUMENTED` | string | unset |  |  |" in lines
    assert "| `SAMPLE_TOKEN` | secret | development value |  |  |" in lines
    assert "| `SAMPLE_ROLES` | comma-separated list | `a,b` |  |  |" in lines
    assert "| `SAMPLE_NAME` | string | `x` | length >= 1, length <= 8, matches `^[a-z]+$` |  |" in lines
