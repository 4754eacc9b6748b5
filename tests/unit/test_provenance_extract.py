"""Values found in free text (app.provenance.extract): order, precedence between kinds, bounds."""

from __future__ import annotations

import pytest

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


def test_scan_says_when_a_cap_cut_the_values():
    many = " ".join(f"https://h{i}.example.com/" for i in range(extract.MAX_VALUES + 1))
    found, complete = extract.scan(many, ("url",))
    assert len(found) == extract.MAX_VALUES and complete is False
    assert extract.scan(" ".join(f"https://h{i}.example.com/" for i in range(extract.MAX_VALUES)), ("url",))[1] is True
    # The same value again is no new one: nothing was left out.
    assert extract.scan(many + " https://h0.example.com/", ("url",))[1] is False
    assert extract.scan("https://h0.example.com/ " * 100, ("url",)) == ([("url", "https://h0.example.com/")], True)
    long_text = "x" * extract.MAX_TEXT_CHARS + " https://evil.example/steal"
    assert extract.scan(long_text, ("url",)) == ([], False)


#: Texts that made a backtracking pattern rescan the text from every offset (quadratic or worse
#: in its length); each is scanned whole, 64 KiB, in linear time.
ADVERSARIAL = {
    "email: long local part, dotted domain without a TLD": "a" * 28000 + "@" + "b." * 13000,
    "email: many @ with a long run between": ("a" * 3000 + "@") * 20,
    "email: a long domain run": "x@" + "b" * 60000,
    "domain: labels without a TLD": "b." * 30000,
    "domain: hyphen runs": ("a" + "-" * 60) * 1000,
    "path: many segments, no end": "/" + "a/" * 30000,
    "path: a long run of slashes": "/a" + "/" * 60000 + "!",
    "amount: long digit groups": "1" + ",000" * 15000 + "x",
    "amount: long digit run": "1" * 60000 + "x",
    "phone: plus runs": "+1 " * 20000,
    "iban: grouped runs": "DE89 " + "3704 " * 12000,
    "url: a long link": "https://" + "a" * 60000,
}


@pytest.mark.timeout(5)
@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_adversarial_texts_are_scanned_in_linear_time(text):
    """Each took seconds to minutes of CPU with a pattern that backtracks from every offset
    (the first 16 s on main); linear-time patterns scan 64 KiB in milliseconds, far inside
    the timeout."""
    values_in(text, ALL)


def test_an_address_with_a_non_ascii_domain_is_found_in_its_a_label_form():
    assert values_in("write to mallory@évil.example today", ("email",)) == [("email", "mallory@xn--vil-9la.example")]
