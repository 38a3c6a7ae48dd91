"""The shared cases of tests/vectors/ratelimit_headers.json: every case of both sections,
the parser's whole answer compared with the expectation."""

import dataclasses
import email.message
import http.client
import io
import json
import os

import pytest

from sluice_client import headers

VECTORS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "vectors",
                       "ratelimit_headers.json")
with open(VECTORS, encoding="utf-8") as f:
    CASES = json.load(f)


def as_dict(parsed):
    d = dataclasses.asdict(parsed)
    return d


@pytest.mark.parametrize("case", CASES["headers"], ids=[c["name"] for c in CASES["headers"]])
def test_headers(case):
    got = headers.parse([tuple(h) for h in case["headers"]], now_ms=case["now_ms"])
    assert as_dict(got) == case["expect"]


@pytest.mark.parametrize("case", CASES["throttle"], ids=[c["name"] for c in CASES["throttle"]])
def test_throttle(case):
    got = headers.parse_throttle(case["reply"])
    assert (None if got is None else dataclasses.asdict(got)) == case["expect"]


def test_every_section_is_read():
    assert len(CASES["headers"]) >= 40 and len(CASES["throttle"]) >= 6


def _message(pairs):
    m = email.message.Message()
    for name, value in pairs:
        m[name] = value
    return m


def _http_message(pairs):
    raw = "".join("%s: %s\r\n" % p for p in pairs) + "\r\n"
    return http.client.parse_headers(io.BytesIO(raw.encode("latin-1")))


CONTAINER_CASE = [c for c in CASES["headers"] if c["name"] == "sluiced, a denial with two limits"][0]


@pytest.mark.parametrize("make", [dict, _message, _http_message], ids=["dict", "Message", "HTTPMessage"])
def test_header_containers(make):
    """The same answer from a dict, an email Message and an http.client HTTPMessage."""
    pairs = [tuple(h) for h in CONTAINER_CASE["headers"]]
    got = headers.parse(make(pairs), now_ms=CONTAINER_CASE["now_ms"])
    assert as_dict(got) == CONTAINER_CASE["expect"]


def test_requests_case_insensitive_dict():
    requests = pytest.importorskip("requests")
    pairs = [tuple(h) for h in CONTAINER_CASE["headers"]]
    d = requests.structures.CaseInsensitiveDict(pairs)
    assert as_dict(headers.parse(d, now_ms=CONTAINER_CASE["now_ms"])) == CONTAINER_CASE["expect"]


def test_message_keeps_repeated_lines():
    """A list field on two lines of an HTTPMessage joins, as in a list of pairs."""
    m = _http_message([("RateLimit-Policy", '"a";q=1;w=1'), ("RateLimit-Policy", '"b";q=2;w=2')])
    assert [p.name for p in headers.parse(m).policies] == ["a", "b"]


def test_a_value_over_4096_bytes_is_ignored():
    member = '"a";q=1;w=1'
    ok = ", ".join([member] * 300)[:4096]
    ok = ok[:ok.rfind(",")]
    assert len(headers.parse([("RateLimit-Policy", ok)]).policies) == 16
    too_long = ", ".join([member] * 400)
    assert len(too_long) > 4096
    assert headers.parse([("RateLimit-Policy", too_long)]).policies == []


@pytest.mark.parametrize("value", ["(", '"', ":abc", "?2", "a;", "a;=1", "a;q=", "1.", "1.2345",
                                   "%\"%zz\"", "@1.5", "a, ", "a b", '"\x01"', "-", "(a", "(a b"])
def test_malformed_lists_fail_the_field(value):
    with pytest.raises(headers.SFError):
        headers.parse_list(value)


def test_rfc9651_items():
    got = headers.parse_list('1, -2, 3.25, "s", tok/x:y, :AQI=:, ?1, ?0, @1700000000, %"f%c3%bc", (a 1);p')
    values = [v for v, _ in got]
    assert values[:3] == [1, -2, headers.Decimal("3.25")]
    assert values[3] == "s" and type(values[4]) is headers.Token and values[4] == "tok/x:y"
    assert type(values[5]) is headers.ByteSeq and values[5] == "AQI="
    assert values[6] is True and values[7] is False
    assert values[8] == headers.Date(1700000000) and values[9] == "f\u00fc"
    assert isinstance(values[10], headers.InnerList) and got[10][1] == {"p": True}
