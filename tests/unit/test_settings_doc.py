"""The generated settings reference (``app.settings_doc``): docs/settings.md matches the code,
every setting is listed, and no secret value is ever printed. Socket-free."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


def test_rows_show_types_defaults_and_limits_as_a_reader_writes_them() -> None:
    lines = settings_doc.render().splitlines()
    row = {line.split(" | ")[0][2:]: line for line in lines if line.startswith("| `TOOLGATE_")}
    assert row["`TOOLGATE_ENGINE`"].startswith("| `TOOLGATE_ENGINE` | `embedded` \\| `opa` | `embedded` |  |")
    assert "| integer | `200` | >= 10, <= 10000 |" in row["`TOOLGATE_ENGINE_GO_GC_PERCENT`"]
    assert "| secret | development value |" in row["`TOOLGATE_AUDIT_KEY_HASH_SECRET`"]
    assert "| secret | unset |" in row["`TOOLGATE_APPROVAL_KEYS`"]
    assert "| comma-separated list | `RS256,ES256,EdDSA,HS256` |" in row["`TOOLGATE_JWT_ALGORITHMS`"]
    assert "| path | `policies` |" in row["`TOOLGATE_POLICY_DIR`"]


def test_a_setting_without_a_section_or_description_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_doc, "SECTIONS", settings_doc.SECTIONS[1:])
    with pytest.raises(ValueError, match="settings in no section: \\['env'\\]"):
        settings_doc.render()


def test_every_variable_serve_sh_reads_is_documented() -> None:
    script = (PROJECT_ROOT / "scripts" / "serve.sh").read_text(encoding="utf-8")
    read = set(re.findall(r"\$\{(SERVE_[A-Z_]+)", script))
    assert read == {"SERVE_STATE_DIR", "SERVE_BUNDLE_BIND"}
    text = settings_doc.render()
    for name in read:
        assert f"| `{name}` |" in text
