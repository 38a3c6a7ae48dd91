"""Windows on the wall clock, shared by sluiced's and the module's tests: commands whose
window is a calendar unit at a UTC offset, and where that window ends, computed here with
Python's datetime (an independent model of the calendar: the C code does its own civil-date
arithmetic).

Each case: (period, utc_offset or None, algorithm, how many windows a take's reset_after
spans: 1 for the fixed window, 2 for the sliding window counter, whose units count in the
next window too)."""

import calendar
import datetime

CASES = [
    ("1h", None, "fixed_window", 1),
    ("1h", "+05:30", "fixed_window", 1),
    ("1d", None, "fixed_window", 1),
    ("1d", "-05:00", "fixed_window", 1),
    ("1d", "+1400", "fixed_window", 1),
    ("1w", None, "fixed_window", 1),
    ("1w", "-0930", "fixed_window", 1),
    ("1mo", None, "fixed_window", 1),
    ("1mo", "-05:00", "fixed_window", 1),
    ("3mo", "+09", "fixed_window", 1),
    ("12mo", None, "fixed_window", 1),
    ("1d", "-05:00", "sliding_window", 2),
    ("1mo", "+02:00", "sliding_window", 2),
]

# Windows of months from a reset day (RESETDAY, reset_day:): (period, utc_offset or
# None, algorithm, spans, reset_day). Days 29 to 31 fall on a shorter month's last day,
# and whatever today is, some of these days are still to come this month and some
# have passed.
DAY_CASES = [
    ("1mo", None, "fixed_window", 1, 15),
    ("1mo", "-05:00", "fixed_window", 1, 15),
    ("1mo", "+1400", "fixed_window", 1, 2),
    ("1mo", None, "fixed_window", 1, 28),
    ("1mo", "+05:30", "fixed_window", 1, 29),
    ("1mo", None, "fixed_window", 1, 30),
    ("1mo", "-0930", "fixed_window", 1, 31),
    ("3mo", "+09", "fixed_window", 1, 10),
    ("12mo", None, "fixed_window", 1, 31),
    ("1mo", "+02:00", "sliding_window", 2, 20),
    ("2mo", None, "sliding_window", 2, 31),
]

UTC = datetime.timezone.utc


def parse_offset(text):
    """'+05:30', '-0500', '+05' or None -> a datetime.timezone."""
    if text is None:
        return UTC
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    minutes = int(digits[:2]) * 60 + (int(digits[2:]) if len(digits) > 2 else 0)
    return datetime.timezone(sign * datetime.timedelta(minutes=minutes))


def _add_months(d, n):
    m = d.month - 1 + n
    return d.replace(year=d.year + m // 12, month=m % 12 + 1)


def _cycle_start(month_index, day, tz):
    """Local midnight of the day a cycle of month_index (months from January 1970)
    begins on: `day`, or the month's last day when it has fewer."""
    y, m = 1970 + month_index // 12, month_index % 12 + 1
    last = calendar.monthrange(y, m)[1]
    return datetime.datetime(y, m, min(day, last), tzinfo=tz)


def window_end(unix_s, period, offset, spans=1, reset_day=None):
    """Unix seconds at which the window holding unix_s ends (spans windows later);
    windows of months begin on reset_day when given."""
    tz = parse_offset(offset)
    local = datetime.datetime.fromtimestamp(unix_s, tz)
    if period.endswith("mo") and reset_day:
        n = int(period[:-2])
        month_index = (local.year - 1970) * 12 + local.month - 1
        if local < _cycle_start(month_index, reset_day, tz):
            month_index -= 1  # the cycle began the month before
        first = month_index - month_index % n
        end = _cycle_start(first + n * spans, reset_day, tz)
    elif period.endswith("mo"):
        n = int(period[:-2])
        month_index = (local.year - 1970) * 12 + local.month - 1
        first = month_index - month_index % n
        start = datetime.datetime(1970, 1, 1, tzinfo=tz)
        end = _add_months(start, first + n * spans)
    else:
        length = {"h": 3600, "d": 86400, "w": 7 * 86400}[period[-1]] * int(period[:-1])
        # Windows count from Monday 1970-01-05 00:00, local time.
        anchor = datetime.datetime(1970, 1, 5, tzinfo=tz)
        elapsed = (local - anchor).total_seconds()
        k = elapsed // length
        end = anchor + datetime.timedelta(seconds=(k + spans) * length)
    return end.timestamp()


def command(key, period, offset, algorithm, limit=5, reset_day=None):
    args = ["SL.TAKE", key, str(limit), period, "ALGORITHM", algorithm]
    if offset is not None:
        args += ["UTCOFFSET", offset]
    if reset_day is not None:
        args += ["RESETDAY", str(reset_day)]
    return args


def as_dict(reply):
    """A decision as a dict, from a RESP3 map or a RESP2 flat array."""
    if isinstance(reply, dict):
        return {(k.decode() if isinstance(k, bytes) else k): v for k, v in reply.items()}
    it = [x.decode() if isinstance(x, bytes) else x for x in reply]
    return dict(zip(it[::2], it[1::2]))
