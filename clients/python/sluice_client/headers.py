"""What an HTTP response (or a CL.THROTTLE reply) tells a client about its rate limits.

`parse(headers, now_ms=None)` reads the IETF fields `RateLimit-Policy` and `RateLimit`
(RFC 9651 Lists, parsed here, bounded), the `X-RateLimit-*` family (or the earlier drafts'
`RateLimit-Limit`/`-Remaining`/`-Reset`) and `Retry-After`, exactly as
tests/vectors/README.md says. Nothing here raises on bad input: a field that cannot be read
is ignored as the rules say.

`parse_throttle(reply)` reads the five integers of a CL.THROTTLE reply.
"""

import re
import time
from dataclasses import dataclass, field
from typing import List, Optional

# A field value longer than this (a list field's after joining its lines) is ignored whole.
MAX_FIELD_BYTES = 4096
# At most this many members of RateLimit-Policy and of RateLimit are kept.
MAX_MEMBERS = 16

INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)


@dataclass(frozen=True)
class Policy:
    """One member of RateLimit-Policy: `quota` units per `window` seconds (None: not said)."""
    name: Optional[str]
    quota: int
    window: Optional[int]
    unit: Optional[str]
    partition: Optional[str]  # the byte sequence's base64 text


@dataclass(frozen=True)
class Limit:
    """One member of RateLimit: `remaining` units now, full again in `reset_ms`."""
    name: str
    remaining: int
    reset_ms: Optional[int]
    partition: Optional[str]


@dataclass(frozen=True)
class XFields:
    """X-RateLimit-Limit, -Remaining, -Reset (or the earlier drafts' RateLimit-*)."""
    limit: Optional[int]
    remaining: Optional[int]
    reset_ms: Optional[int]


@dataclass(frozen=True)
class Parsed:
    """The whole answer of parse()."""
    policies: List[Policy] = field(default_factory=list)
    limits: List[Limit] = field(default_factory=list)
    x: Optional[XFields] = None
    retry_after_ms: Optional[int] = None


@dataclass(frozen=True)
class Throttle:
    """A CL.THROTTLE reply: retry_after_ms None when no wait is said (allowed, or never)."""
    allowed: bool
    limit: int
    remaining: int
    retry_after_ms: Optional[int]
    reset_ms: int


# ---------------------------------------------------------------------------------------
# RFC 9651 structured fields: the parts a List needs. Bare items come back as Python
# values: int (Integer), Decimal (below), str (String), Token, ByteSeq, bool, Date,
# DisplayString. `bool` is tested before `int` everywhere (True is an int in Python).


class Token(str):
    """An sf-token (a String is a plain str)."""


class ByteSeq(str):
    """An sf-binary, kept as its base64 text."""


class DisplayString(str):
    """An sf-displaystring, decoded."""


@dataclass(frozen=True)
class Decimal:
    """An sf-decimal, kept as its text (no client needs its value)."""
    text: str


@dataclass(frozen=True)
class Date:
    """An sf-date: seconds since the Unix epoch."""
    seconds: int


class InnerList(list):
    """An inner list's items (each an (item, params) pair)."""


class SFError(ValueError):
    """The field is not a valid structured field: RFC 9651 says to ignore it whole."""


_DIGITS = "0123456789"
_LCALPHA = "abcdefghijklmnopqrstuvwxyz"
_ALPHA = _LCALPHA + _LCALPHA.upper()
_TCHAR = set(_ALPHA + _DIGITS + "!#$%&'*+-.^_`|~")
_TOKEN_REST = _TCHAR | set(":/")
_KEY_FIRST = set(_LCALPHA + "*")
_KEY_REST = set(_LCALPHA + _DIGITS + "_-.*")
_B64 = set(_ALPHA + _DIGITS + "+/=")
_LCHEX = "0123456789abcdef"


class _Reader:
    """A cursor over one field value. Every loop consumes at least one character, so a
    parse is linear in the (bounded) length."""

    __slots__ = ("s", "i", "n")

    def __init__(self, s):
        self.s = s
        self.i = 0
        self.n = len(s)

    def peek(self):
        return self.s[self.i] if self.i < self.n else ""

    def skip_sp(self):
        while self.i < self.n and self.s[self.i] == " ":
            self.i += 1

    def skip_ows(self):
        while self.i < self.n and self.s[self.i] in " \t":
            self.i += 1

    def done(self):
        return self.i >= self.n


def parse_list(text):
    """An RFC 9651 List: a list of (item_or_InnerList, params) pairs, params a dict (the
    last of a repeated key wins). Raises SFError when `text` is not a List. Leading and
    trailing spaces and tabs (HTTP's OWS around a field value) are dropped first."""
    r = _Reader(text.strip(" \t"))
    members = []
    while not r.done():
        members.append(_member(r))
        r.skip_ows()
        if r.done():
            return members
        if r.peek() != ",":
            raise SFError("expected ',' at %d" % r.i)
        r.i += 1
        r.skip_ows()
        if r.done():
            raise SFError("a trailing ','")
    return members


def _member(r):
    if r.peek() == "(":
        return _inner_list(r)
    return _item(r)


def _item(r):
    value = _bare_item(r)
    return value, _params(r)


def _inner_list(r):
    r.i += 1  # '('
    items = InnerList()
    while not r.done():
        r.skip_sp()
        if r.peek() == ")":
            r.i += 1
            return items, _params(r)
        items.append(_item(r))
        if r.peek() not in (" ", ")"):
            raise SFError("an inner list's item must be followed by ' ' or ')'")
    raise SFError("an unterminated inner list")


def _params(r):
    params = {}
    while r.peek() == ";":
        r.i += 1
        r.skip_sp()
        key = _key(r)
        value = True
        if r.peek() == "=":
            r.i += 1
            value = _bare_item(r)
        params.pop(key, None)  # the last one counts (and takes the last place)
        params[key] = value
    return params


def _key(r):
    start = r.i
    if r.peek() not in _KEY_FIRST or r.done():
        raise SFError("a key must begin with a lowercase letter or '*'")
    r.i += 1
    while r.i < r.n and r.s[r.i] in _KEY_REST:
        r.i += 1
    return r.s[start:r.i]


def _bare_item(r):
    c = r.peek()
    if c == "":
        raise SFError("an item is missing")
    if c == "-" or c in _DIGITS:
        return _number(r)
    if c == '"':
        return _string(r)
    if c in _ALPHA or c == "*":
        return _token(r)
    if c == ":":
        return _bytes(r)
    if c == "?":
        return _boolean(r)
    if c == "@":
        r.i += 1
        v = _number(r)
        if type(v) is not int:
            raise SFError("a date must be an integer")
        return Date(v)
    if c == "%":
        return _display_string(r)
    raise SFError("no item begins with %r" % c)


def _number(r):
    start = r.i
    sign = 1
    if r.peek() == "-":
        sign = -1
        r.i += 1
    if r.peek() not in _DIGITS or r.done():
        raise SFError("a number needs a digit")
    digits_start = r.i
    dot = -1
    while r.i < r.n:
        c = r.s[r.i]
        if c in _DIGITS:
            r.i += 1
        elif c == "." and dot < 0:
            if r.i - digits_start > 12:
                raise SFError("a decimal's integer part has at most 12 digits")
            dot = r.i
            r.i += 1
        else:
            break
        if dot < 0 and r.i - digits_start > 15:
            raise SFError("an integer has at most 15 digits")
        if dot >= 0 and r.i - digits_start > 16:
            raise SFError("a decimal has at most 16 characters")
    if dot < 0:
        return sign * int(r.s[digits_start:r.i])
    frac = r.i - dot - 1
    if frac < 1 or frac > 3:
        raise SFError("a decimal has 1 to 3 fractional digits")
    return Decimal(r.s[start:r.i])


def _string(r):
    r.i += 1  # '"'
    out = []
    while r.i < r.n:
        c = r.s[r.i]
        r.i += 1
        if c == "\\":
            if r.i >= r.n or r.s[r.i] not in '"\\':
                raise SFError("a string escapes only '\"' and '\\'")
            out.append(r.s[r.i])
            r.i += 1
        elif c == '"':
            return "".join(out)
        elif " " <= c <= "~":
            out.append(c)
        else:
            raise SFError("a string holds printable ASCII only")
    raise SFError("an unterminated string")


def _token(r):
    start = r.i
    r.i += 1
    while r.i < r.n and r.s[r.i] in _TOKEN_REST:
        r.i += 1
    return Token(r.s[start:r.i])


def _bytes(r):
    r.i += 1  # ':'
    start = r.i
    while r.i < r.n and r.s[r.i] in _B64:
        r.i += 1
    if r.peek() != ":":
        raise SFError("a byte sequence is base64 between ':'")
    text = r.s[start:r.i]
    r.i += 1
    return ByteSeq(text)


def _boolean(r):
    r.i += 1  # '?'
    c = r.peek()
    if c not in ("0", "1") or c == "":
        raise SFError("a boolean is ?0 or ?1")
    r.i += 1
    return c == "1"


def _display_string(r):
    r.i += 1  # '%'
    if r.peek() != '"':
        raise SFError("a display string begins with %\"")
    r.i += 1
    out = bytearray()
    while r.i < r.n:
        c = r.s[r.i]
        r.i += 1
        if c == "%":
            h = r.s[r.i:r.i + 2]
            if len(h) != 2 or h[0] not in _LCHEX or h[1] not in _LCHEX:
                raise SFError("a display string's %-escape is two lowercase hex digits")
            out.append(int(h, 16))
            r.i += 2
        elif c == '"':
            try:
                return DisplayString(out.decode("utf-8"))
            except UnicodeDecodeError:
                raise SFError("a display string is UTF-8") from None
        elif " " <= c <= "~":
            out.append(ord(c))
        else:
            raise SFError("a display string holds printable ASCII only")
    raise SFError("an unterminated display string")


# ---------------------------------------------------------------------------------------
# The fields.


def _lines(headers):
    """(lowercased name, value) for every field line of `headers`, in order: a list of
    pairs, a dict (a value may be a list of lines), an http.client.HTTPMessage /
    email.message.Message, a requests CaseInsensitiveDict or a urllib3 HTTPHeaderDict."""
    if headers is None:
        return []
    if hasattr(headers, "iteritems"):  # urllib3's HTTPHeaderDict: every line
        pairs = headers.iteritems()
    elif hasattr(headers, "items"):  # Message.items() lists repeated lines too
        pairs = headers.items()
    else:
        pairs = headers
    out = []
    for pair in pairs:
        try:
            name, value = pair
        except (TypeError, ValueError):
            continue
        if isinstance(name, bytes):
            name = name.decode("latin-1")
        if not isinstance(name, str):
            continue
        values = value if isinstance(value, (list, tuple)) else (value,)
        for v in values:
            if isinstance(v, bytes):
                v = v.decode("latin-1")
            if isinstance(v, str):
                out.append((name.lower(), v))
    return out


def _list_field(lines, name):
    """The lines of a list field joined with ', ', or None when absent."""
    vals = [v for n, v in lines if n == name]
    return ", ".join(vals) if vals else None


def _single_field(lines, name):
    """The first line of a single-valued field, or None when absent; "" (invalid, as
    every reader takes it) when longer than MAX_FIELD_BYTES."""
    for n, v in lines:
        if n == name:
            return "" if len(v.encode("utf-8", "surrogateescape")) > MAX_FIELD_BYTES else v
    return None


def _members(text):
    """The items of a list field as (item, params); [] when absent, too long or invalid."""
    if text is None or len(text.encode("utf-8", "surrogateescape")) > MAX_FIELD_BYTES:
        return []
    try:
        return [(item, params) for item, params in parse_list(text)
                if not isinstance(item, InnerList)]
    except SFError:
        return []


def _is_int(v):
    return type(v) is int


def _name_of(item):
    return str(item) if type(item) in (str, Token) else None


def _opt_unit(params):
    """(ok, unit): `qu` absent, or a String or Token."""
    if "qu" not in params:
        return True, None
    v = params["qu"]
    return (True, str(v)) if type(v) in (str, Token) else (False, None)


def _opt_partition(params):
    if "pk" not in params:
        return True, None
    v = params["pk"]
    return (True, str(v)) if type(v) is ByteSeq else (False, None)


def _policies(text):
    out = []
    for item, params in _members(text):
        if len(out) == MAX_MEMBERS:
            break
        if _is_int(item):  # the earlier drafts: the item is the quota
            name, quota = None, item
        else:
            name, quota = _name_of(item), params.get("q")
            if name is None:
                continue
        if not _is_int(quota) or quota < 0:
            continue
        window = params.get("w")
        if "w" in params and (not _is_int(window) or window <= 0):
            continue
        ok_u, unit = _opt_unit(params)
        ok_p, part = _opt_partition(params)
        if ok_u and ok_p:
            out.append(Policy(name, quota, window, unit, part))
    return out


def _limits(text):
    out = []
    for item, params in _members(text):
        if len(out) == MAX_MEMBERS:
            break
        name = _name_of(item)
        r = params.get("r")
        if name is None or not _is_int(r) or r < 0:
            continue
        reset_ms = None
        if "t" in params:
            t = params["t"]
            if not _is_int(t) or t < 0:
                continue
            reset_ms = t * 1000
        ok_p, part = _opt_partition(params)
        if ok_p:
            out.append(Limit(name, r, reset_ms, part))
    return out


def _trim(text):
    return text.strip(" \t")


def _all_digits(s):
    return s != "" and all(c in _DIGITS for c in s)


def _int64(text, leading=False):
    """An integer that fits 64 bits, or None. With `leading`, the digits at the start of
    the (trimmed) value, whatever follows them."""
    s = _trim(text)
    neg = s.startswith("-")
    body = s[1:] if neg else s
    if leading:
        n = 0
        while n < len(body) and body[n] in _DIGITS:
            n += 1
        body = body[:n]
    if not _all_digits(body) or len(body) > 20:
        return None
    v = -int(body) if neg else int(body)
    return v if INT64_MIN <= v <= INT64_MAX else None


def _decimal_ms(text):
    """A non-negative number with an optional fraction, as whole milliseconds rounded up
    (units of 1/1000 of the number), or None. The integer part must fit 64 bits."""
    s = _trim(text)
    whole, dot, frac = s.partition(".")
    if not _all_digits(whole) or len(whole) > 19 or (dot and not _all_digits(frac)):
        return None
    w = int(whole)
    if w > INT64_MAX:
        return None
    ms = w * 1000 + (int(frac[:3].ljust(3, "0")) if frac else 0)
    if frac[3:].strip("0"):
        ms += 1  # a fraction of a millisecond rounds up
    return ms


def _reset_ms(text, now_ms):
    """X-RateLimit-Reset: seconds from now, or a Unix epoch in seconds (>= 10^9) or in
    milliseconds (>= 10^12); as milliseconds from now, a past time 0."""
    thousandths = _decimal_ms(text)
    if thousandths is None:
        return None
    if thousandths >= 10**12 * 1000:  # milliseconds since the epoch (thousandths of one)
        at = -(-thousandths // 1000)
        return max(0, at - now_ms)
    if thousandths >= 10**9 * 1000:  # seconds since the epoch
        return max(0, thousandths - now_ms)
    return thousandths


_WKDAY = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_WEEKDAY = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MON = "(" + "|".join(_MONTHS) + ")"
_TIME = "([0-9]{2}):([0-9]{2}):([0-9]{2})"
_IMF = re.compile(r"(?:%s), ([0-9]{2}) %s ([0-9]{4}) %s GMT" % ("|".join(_WKDAY), _MON, _TIME))
_RFC850 = re.compile(r"(?:%s), ([0-9]{2})-%s-([0-9]{2}) %s GMT" % ("|".join(_WEEKDAY), _MON, _TIME))
_ASCTIME = re.compile(r"(?:%s) %s ( [0-9]|[0-9]{2}) %s ([0-9]{4})" % ("|".join(_WKDAY), _MON, _TIME))


def _days_from_civil(y, m, d):
    """Days since 1970-01-01 of a proleptic Gregorian date (integer arithmetic)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _month_days(y, m):
    if m == 2:
        return 29 if (y % 4 == 0 and y % 100 != 0) or y % 400 == 0 else 28
    return 30 if m in (4, 6, 9, 11) else 31


def _http_date_ms(text):
    """An HTTP-date in any of RFC 9110's three forms, as Unix milliseconds, or None."""
    m = _IMF.fullmatch(text)
    if m:
        day, mon, year, hh, mm, ss = m.groups()
    else:
        m = _RFC850.fullmatch(text)
        if m:
            day, mon, yy, hh, mm, ss = m.groups()
            year = ("20" if int(yy) < 70 else "19") + yy
        else:
            m = _ASCTIME.fullmatch(text)
            if not m:
                return None
            mon, day, hh, mm, ss, year = m.groups()
    y, mo, d = int(year), _MONTHS.index(mon) + 1, int(day.strip())
    h, mi, s = int(hh), int(mm), int(ss)
    if not 1 <= d <= _month_days(y, mo) or h > 23 or mi > 59 or s > 60:
        return None
    return ((_days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + s * 1000


def _retry_after_ms(text, now_ms):
    s = _trim(text)
    if s[:1] in tuple(_DIGITS):
        ms = _decimal_ms(s)
        return None if ms is None else min(ms, INT64_MAX)
    at = _http_date_ms(s)
    return None if at is None else max(0, at - now_ms)


def _x_fields(lines, now_ms, prefix):
    names = (prefix + "limit", prefix + "remaining", prefix + "reset")
    raw = [_single_field(lines, n) for n in names]
    if all(v is None for v in raw):
        return None
    limit = None if raw[0] is None else _int64(raw[0], leading=True)
    remaining = None if raw[1] is None else _int64(raw[1])
    if remaining is not None and remaining < 0:
        remaining = 0
    reset_ms = None if raw[2] is None else _reset_ms(raw[2], now_ms)
    return XFields(limit, remaining, reset_ms)


def parse(headers, now_ms=None):
    """Reads a response's rate limit fields. `headers`: see _lines(); `now_ms` the
    receiving clock in Unix milliseconds (default: time.time()), for the fields that give
    a date. Returns a Parsed; never raises on bad field values."""
    if now_ms is None:
        now_ms = time.time_ns() // 1000000
    lines = _lines(headers)
    x = _x_fields(lines, now_ms, "x-ratelimit-")
    if x is None:
        x = _x_fields(lines, now_ms, "ratelimit-")
    ra = _single_field(lines, "retry-after")
    return Parsed(
        policies=_policies(_list_field(lines, "ratelimit-policy")),
        limits=_limits(_list_field(lines, "ratelimit")),
        x=x,
        retry_after_ms=None if ra is None else _retry_after_ms(ra, now_ms),
    )


def parse_throttle(reply):
    """A CL.THROTTLE reply ([limited, limit, remaining, retry_after, reset], seconds) as a
    Throttle, or None when it is not one (not five integers, or `limited` not 0 or 1)."""
    if not isinstance(reply, (list, tuple)) or len(reply) != 5:
        return None
    if not all(type(v) is int for v in reply):
        return None
    limited, limit, remaining, retry_after, reset = reply
    if limited not in (0, 1):
        return None
    return Throttle(
        allowed=limited == 0,
        limit=limit,
        remaining=remaining,
        retry_after_ms=None if retry_after < 0 else retry_after * 1000,
        reset_ms=max(0, reset) * 1000,
    )
