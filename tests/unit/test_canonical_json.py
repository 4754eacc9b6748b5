"""``app.fingerprint.canonical_json`` (orjson after a preparing walk) writes the same bytes as
the ``rfc8785`` package, the reference implementation, on random JSON documents, and refuses
what that package refuses with its error."""

from __future__ import annotations

import math

import pytest
import rfc8785
from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.fingerprint import canonical_json, es_number

_MAX_EXACT_INT = 2**53 - 1

# Strings without lone surrogates (I-JSON), over the whole range: control characters, the
# U+E000-U+FFFF block and characters above U+FFFF, whose relative order RFC 8785 fixes by UTF-16.
_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
_names = st.one_of(_text, st.sampled_from(["a", "\ue000", "\U0001f600", "\uffff", "\U00010000", "b\x7f", ""]))
_numbers = st.one_of(
    st.integers(-_MAX_EXACT_INT, _MAX_EXACT_INT),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, -0.0, 1e21, 1e-7, 1e-6, 5e-324, 1.7976931348623157e308, 0.1, 2.0**53]),
)
_scalars = st.one_of(st.none(), st.booleans(), _numbers, _text)
_documents = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(_names, inner, max_size=5)),
    max_leaves=30,
)


@settings(max_examples=1500, deadline=None)
@given(_documents)
@example({"\U0001f600": 1, "\ue000": 2})  # UTF-16 order differs from code point order
@example({"a": [1.5, {"b": 2.0}], "c": (1, 2.25)})
def test_same_bytes_as_the_rfc8785_package(document: object) -> None:
    assert canonical_json(document) == rfc8785.dumps(document)


@settings(max_examples=3000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_numbers_are_written_as_ecmascript_writes_them(number: float) -> None:
    assert es_number(number).encode() == rfc8785.dumps(number)
    assert float(es_number(number)) == number


def test_a_document_without_floats_is_not_copied() -> None:
    """The preparing walk returns the value itself when it holds no float (no copy per call)."""
    from app.fingerprint import _prepared

    document = {"a": [1, "x", None, True], "b": {"c": "d"}}
    assert _prepared(document) is document


@pytest.mark.parametrize(
    "value",
    [2**53, -(2**53), {"n": 2**64}, [math.nan], {"x": math.inf}, "\ud800", {"\udfff": 1}],
    ids=["int-above", "int-below", "int-64bit", "nan", "inf", "lone-surrogate", "surrogate-key"],
)
def test_what_rfc8785_refuses_is_refused_with_its_error(value: object) -> None:
    with pytest.raises((rfc8785.CanonicalizationError, UnicodeError)) as reference:
        rfc8785.dumps(value)
    with pytest.raises(type(reference.value)):
        canonical_json(value)


def test_other_types_go_to_the_rfc8785_package() -> None:
    """A str subclass (an enum member, say) is written by the package, the same as its value."""
    import enum

    class Colour(enum.StrEnum):
        RED = "red"

    assert canonical_json({"c": Colour.RED}) == rfc8785.dumps({"c": Colour.RED})
