"""``app.terminal``: caller text made safe to print, exactly and reversibly."""

from __future__ import annotations

import json
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from app.terminal import json_printable, printable


def test_plain_text_is_unchanged():
    assert printable("payment over 1000 needs approval (approved by u-3) é ü 漢字 🙂") == (
        "payment over 1000 needs approval (approved by u-3) é ü 漢字 🙂"
    )


def test_controls_format_and_separators_are_escaped():
    assert printable("a\nb\r\tc\x00\x7f") == "a\\x0ab\\x0d\\x09c\\x00\\x7f"
    assert printable("\x1b[2J\x9b31m") == "\\x1b[2J\\x9b31m"
    assert printable("\u202eabc\u202c \u2066x\u2069 \u200b \u00ad") == "\\u202eabc\\u202c \\u2066x\\u2069 \\u200b \\xad"
    assert printable("\u2028\u2029") == "\\u2028\\u2029"
    assert printable("\U000e0041") == "\\U000e0041"
    assert printable("a\\x0ab") == "a\\\\x0ab"  # a literal backslash cannot pass for an escape


@given(st.text())
def test_escaped_text_has_no_unsafe_character_and_says_what_was_stored(text: str) -> None:
    shown = printable(text)
    assert not [c for c in shown if unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp"}]
    assert shown.encode("ascii", "backslashreplace").decode("unicode_escape") == text


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20))
def test_json_printable_keeps_the_json_value(value) -> None:
    shown = json_printable(json.dumps(value, ensure_ascii=False))
    assert json.loads(shown) == value
    assert not [c for c in shown if unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp"}]
