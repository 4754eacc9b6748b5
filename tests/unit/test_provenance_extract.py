"""Values found in free text (app.provenance.extract): order, precedence between kinds, bounds."""

from __future__ import annotations

from app.provenance import extract
from app.provenance.extract import values_in

ALL = ("url", "domain", "email", "iban", "phone", "path", "amount")


def test_values_come_in_order_of_appearance_each_once_with_their_keys():
    text = ("Send 100.50 EUR to DE89 3704 0044 0532 0130 00, see https://Evil.com/x. or www.foo.org; "
            "mail Bob@X.com or call +1 (555) 123-4567; file /etc//passwd. Again: https://evil.com/x")
    assert values_in(text, ALL) == [
        ("amount", "100.5"), ("iban", "DE89370400440532013000"), ("url", "https://evil.com/x"),
        ("url", "http://www.foo.org/"), ("email", "bob@x.com"), ("phone", "+15551234567"), ("path", "/etc/passwd"),
    ]


def test_a_text_claimed_by_one_kind_is_not_read_as_another():
    """An IBAN's digit groups are no amounts or phone numbers; a link's host no bare domain."""
    assert values_in("to DE89 3704 0044 0532 0130 00", ALL) == [("iban", "DE89370400440532013000")]
    assert values_in("https://a.example.com/p and b.example.org", ("url", "domain")) == [
        ("url", "https://a.example.com/p"), ("domain", "b.example.org")]


def test_links_in_any_case_are_found():
    assert values_in("go to hTtPs://Evil.example/x or WWW.other.example", ("url",)) == [
        ("url", "https://evil.example/x"), ("url", "http://www.other.example/")]


def test_only_the_kinds_asked_for():
    assert values_in("pay 12 EUR to GB29NWBK60161331926819", ("iban",)) == [("iban", "GB29NWBK60161331926819")]
    assert values_in("nothing here", ALL) == []


def test_bounded(monkeypatch):
    monkeypatch.setattr(extract, "MAX_VALUES", 3)
    assert len(values_in(" ".join(f"https://h{i}.example.com/" for i in range(10)), ("url",))) == 3
