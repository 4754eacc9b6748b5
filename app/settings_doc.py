"""The settings reference, ``docs/settings.md``, generated from ``Settings.model_fields``.

    python -m app.settings_doc            print the reference
    python -m app.settings_doc --write    rewrite docs/settings.md
    python -m app.settings_doc --check    exit 1 when docs/settings.md differs from the code

One section per settings section (``app.settings.SECTIONS``, headed by the first line of its
docstring), one row per field it declares, its text the field's ``Field(description=...)``.
Defaults are shown as a reader sets them: paths relative to the project root, secrets never (a
secret with a built-in development value reads "development value"). Only reads the classes:
no environment variable is consulted. Raises ``ValueError`` when a field of ``Settings`` is in
no section or has no description.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from app.settings import PROJECT_ROOT, SECTIONS, Settings

DOC_PATH = PROJECT_ROOT / "docs" / "settings.md"
COMMAND = "python -m app.settings_doc --write"
#: The variables ``scripts/serve.sh`` reads itself (no gateway setting): name, default, meaning.
SERVE_VARIABLES = (
    ("SERVE_STATE_DIR", "`var`", "Where serve.sh keeps its state: pidfiles `run/`, logs `log/` (the gateway's "
     "`log/gateway.log`, `opa.log`, `bundle-server.log`, `proxy.log`), Redis data `redis/`, the nginx and OPA "
     "configurations, pushed tenant data `tenant-data/`."),
    ("SERVE_BUNDLE_BIND", "`127.0.0.1:8282`", "HOST:PORT of the development bundle server "
     "(`toolgate policy serve-bundle`) the OPA sidecar polls when `TOOLGATE_ENGINE=opa`."),
)

def _type_text(annotation: Any) -> str:
    """How a reader writes a value of this type in the environment."""
    origin = get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{value}`" for value in get_args(annotation))
    if origin in (Union, types.UnionType):
        parts = [_type_text(arg) for arg in get_args(annotation) if arg is not type(None)]
        return " or ".join(parts)
    if origin is list:
        return "comma-separated list"
    if annotation is SecretStr:
        return "secret"
    if annotation is bool:
        return "`true` \\| `false`"
    if annotation is Path:
        return "path"
    if annotation in (int, float):
        return "integer" if annotation is int else "number"
    if annotation is str:
        return "string"
    return getattr(annotation, "__name__", str(annotation))


def _value_text(value: Any) -> str:
    """A default as the reader would set it; paths under the project root are shown relative."""
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, list | tuple):
        return f"`{','.join(str(item) for item in value)}`" if value else "empty"
    text = str(value)
    root = str(PROJECT_ROOT)
    if text == root:
        return "the project root"
    if text.startswith(root + "/"):
        text = text[len(root) + 1 :]
    return f"`{text}`"


def _default_text(field: FieldInfo) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    if isinstance(value, SecretStr):
        return "development value"
    return _value_text(value)


def _limits_text(field: FieldInfo) -> str:
    """The field's constraints (bounds, lengths, pattern), e.g. ``>= 10, <= 10000``."""
    parts: list[str] = []
    for item in field.metadata:
        for attribute, symbol in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            bound = getattr(item, attribute, None)
            if bound is not None:
                parts.append(f"{symbol} {bound}")
        if isinstance(item, annotated_types.MinLen):
            parts.append(f"length >= {item.min_length}")
        if isinstance(item, annotated_types.MaxLen):
            parts.append(f"length <= {item.max_length}")
        pattern = getattr(item, "pattern", None)
        if pattern is not None:
            parts.append(f"matches `{pattern}`")
    return ", ".join(parts)


def _cell(text: str) -> str:
    """Markdown-table-safe cell text: one line, pipes escaped."""
    text = " ".join(text.split())
    return re.sub(r"(?<!\\)\|", r"\\|", text)


def _own_fields(section: type[BaseModel]) -> list[str]:
    """The fields ``section`` declares itself (not those of the sections it extends)."""
    return [name for name in inspect.get_annotations(section) if name in section.model_fields]


def sections() -> Iterable[tuple[str, list[str]]]:
    """``(heading, field names)`` of every section. Raises ``ValueError`` when a field of
    ``Settings`` is in no section or has no description."""
    listed: set[str] = set()
    for section in SECTIONS:
        names = _own_fields(section)
        listed.update(names)
        yield (section.__doc__ or section.__name__).strip().splitlines()[0].rstrip("."), names
    missing = sorted(set(Settings.model_fields) - listed)
    undescribed = sorted(n for n, f in Settings.model_fields.items() if not f.description)
    if missing or undescribed:
        raise ValueError(f"settings in no section: {missing}; settings without a description: {undescribed}")


def _row(name: str, field: FieldInfo, prefix: str) -> str:
    cells = (
        f"`{prefix}{name.upper()}`",
        _cell(_type_text(field.annotation)),
        _cell(_default_text(field)),
        _cell(_limits_text(field)),
        _cell(field.description or ""),
    )
    return "| " + " | ".join(cells) + " |"


def render() -> str:
    """The whole reference as Markdown, deterministic for the code."""
    prefix = str(Settings.model_config.get("env_prefix", ""))
    out = [
        "# Settings reference",
        "",
        f"<!-- Generated by `{COMMAND}` from the field descriptions of `app.settings`; edit them",
        "     there, not this file. tests/unit/test_settings_doc.py fails when this file is stale. -->",
        "",
        "Every setting is an environment variable, read once at start. Every invalid setting is",
        "reported together and the process does not start. Lists are comma-separated",
        "(`a,b,c`); booleans are `true` or `false`; \"unset\" means the variable is absent.",
        "How to run and secure the gateway with these settings: [operators.md](operators.md).",
    ]
    for heading, names in sections():
        out += ["", f"## {heading}", "", "| setting | type | default | limits | meaning |", "|---|---|---|---|---|"]
        out += [_row(name, Settings.model_fields[name], prefix) for name in names]
    out += ["", "## scripts/serve.sh's own variables (the development runner, not the gateway)", "",
            "The ports it uses are the settings above: `TOOLGATE_PROXY_LISTEN` (8080), `TOOLGATE_BIND` (8081),",
            "`TOOLGATE_REDIS_URL` (6379), `TOOLGATE_OPA_URL` (8181), and `SERVE_BUNDLE_BIND` (8282).", "",
            "| variable | default | meaning |", "|---|---|---|"]
    out += [f"| `{name}` | {default} | {_cell(meaning)} |" for name, default, meaning in SERVE_VARIABLES]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print, write or check the reference; returns the exit code (1: the file is stale)."""
    parser = argparse.ArgumentParser(prog="python -m app.settings_doc", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"rewrite {DOC_PATH.relative_to(PROJECT_ROOT)}")
    mode.add_argument("--check", action="store_true", help="exit 1 when the checked-in file is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        DOC_PATH.write_text(text, encoding="utf-8")
        return 0
    if args.check:
        current = DOC_PATH.read_text(encoding="utf-8") if DOC_PATH.is_file() else ""
        if current != text:
            print(f"{DOC_PATH.relative_to(PROJECT_ROOT)} is stale: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
