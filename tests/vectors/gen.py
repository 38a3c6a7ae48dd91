# Writes ratelimit_headers.json: the header-parsing cases every client (C,
# Python, Node.js) passes. Expectations are written by hand, case by case;
# this script only spares the JSON its repetition. Run: python3 gen.py
import json

NOW = 1796126400000  # Tue, 01 Dec 2026 12:00:00 GMT, in ms


def P(quota, window=None, name=None, unit=None, partition=None):
    return {"name": name, "quota": quota, "window": window, "unit": unit,
            "partition": partition}


def L(remaining, reset_ms=None, name=None, partition=None):
    return {"name": name, "remaining": remaining, "reset_ms": reset_ms,
            "partition": partition}


def X(limit=None, remaining=None, reset_ms=None):
    return {"limit": limit, "remaining": remaining, "reset_ms": reset_ms}


cases = []


def case(name, headers, policies=(), limits=(), x=None, retry_after_ms=None):
    cases.append({"name": name, "now_ms": NOW, "headers": [list(h) for h in headers],
                  "expect": {"policies": list(policies), "limits": list(limits),
                             "x": x, "retry_after_ms": retry_after_ms}})


# ---- what sluiced writes ----
case("sluiced, one limit",
     [("X-RateLimit-Limit", "100"), ("X-RateLimit-Remaining", "99"),
      ("X-RateLimit-Reset", "1"),
      ("RateLimit-Policy", '"default";q=100;w=60'), ("RateLimit", '"default";r=99;t=1')],
     [P(100, 60, "default")], [L(99, 1000, "default")], X(100, 99, 1000))
case("sluiced, a denial with two limits",
     [("X-RateLimit-Limit", "10"), ("X-RateLimit-Remaining", "0"),
      ("X-RateLimit-Reset", "6"), ("Retry-After", "6"),
      ("RateLimit-Policy", '"burst";q=10;w=1, "daily";q=1000;w=86400'),
      ("RateLimit", '"burst";r=0;t=6, "daily";r=990;t=864')],
     [P(10, 1, "burst"), P(1000, 86400, "daily")],
     [L(0, 6000, "burst"), L(990, 864000, "daily")], X(10, 0, 6000), 6000)

# ---- the IETF fields: RFC 9651 lists ----
case("parameters in any order, unknown ones ignored",
     [("RateLimit-Policy", '"api";w=60;zz=1;q=50;qu="requests"'),
      ("RateLimit", '"api";t=10;x="y";r=7')],
     [P(50, 60, "api", "requests")], [L(7, 10000, "api")])
case("odd whitespace",
     [("ratelimit-policy", '  "a";q=1;w=2 ,   "b";q=3;w=4  '),
      ("RATELIMIT", '"a";r=1;t=2,"b";r=3;t=4')],
     [P(1, 2, "a"), P(3, 4, "b")], [L(1, 2000, "a"), L(3, 4000, "b")])
case("a field on two lines joins into one list",
     [("RateLimit-Policy", '"a";q=1;w=1'), ("RateLimit-Policy", '"b";q=2;w=2')],
     [P(1, 1, "a"), P(2, 2, "b")])
case("a token as the name is accepted",
     [("RateLimit-Policy", "api;q=5;w=10"), ("RateLimit", "api;r=4;t=3")],
     [P(5, 10, "api")], [L(4, 3000, "api")])
case("the earlier drafts' integer item: the quota, no name",
     [("RateLimit-Policy", "100;w=60")], [P(100, 60)])
case("window absent",
     [("RateLimit-Policy", '"a";q=5')], [P(5, None, "a")])
case("reset absent",
     [("RateLimit", '"a";r=5')], [], [L(5, None, "a")])
case("a partition key is kept as its base64 text",
     [("RateLimit-Policy", '"p";q=9;w=1;pk=:dXNlcjE=:'), ("RateLimit", '"p";r=8;t=1;pk=:dXNlcjE=:')],
     [P(9, 1, "p", None, "dXNlcjE=")], [L(8, 1000, "p", "dXNlcjE=")])
case("a string with escapes",
     [("RateLimit-Policy", r'"a\"b\\c";q=1;w=1')], [P(1, 1, 'a"b\\c')])
case("a duplicate parameter: the last wins",
     [("RateLimit-Policy", '"a";q=1;q=2;w=3')], [P(2, 3, "a")])
case("a member without its required parameter is skipped, the rest kept",
     [("RateLimit-Policy", '"a";w=60, "b";q=5;w=60'), ("RateLimit", '"a";t=1, "b";r=2;t=1')],
     [P(5, 60, "b")], [L(2, 1000, "b")])
case("a member whose parameter has the wrong type is skipped",
     [("RateLimit-Policy", '"a";q="5";w=60, "b";q=5.5;w=1, "c";q;w=1, "d";q=1;w="x", "e";q=2;w=2'),
      ("RateLimit", '"a";r=-1;t=1, "b";r=1;t=-1, "c";r=1;t=2')],
     [P(2, 2, "e")], [L(1, 2000, "c")])
case("a zero window is skipped",
     [("RateLimit-Policy", '"a";q=5;w=0, "b";q=0;w=1')], [P(0, 1, "b")])
case("an inner list is skipped",
     [("RateLimit-Policy", '("a" "b");q=1;w=1, "c";q=1;w=1')], [P(1, 1, "c")])
case("a field that is not a list is ignored whole",
     [("RateLimit-Policy", '"a";q=1;w=1, "b";Q=2'), ("RateLimit", '"a";r=1;t=1,')])
case("an integer of 16 digits fails the field",
     [("RateLimit-Policy", '"a";q=1000000000000000;w=1, "b";q=1;w=1')])
case("an integer of 15 digits is kept",
     [("RateLimit", '"a";r=999999999999999;t=0')], [], [L(999999999999999, 0, "a")])
case("garbage",
     [("RateLimit-Policy", "\u00e9t\u00e9"), ("RateLimit", ";;;"), ("X-RateLimit-Limit", "lots"),
      ("X-RateLimit-Remaining", ""), ("X-RateLimit-Reset", "soon"), ("Retry-After", "later")],
     x=X())
case("an empty field is an empty list",
     [("RateLimit-Policy", ""), ("RateLimit", "   ")])
case("at most 16 members are read",
     [("RateLimit-Policy", ", ".join('"p%d";q=%d;w=1' % (i, i) for i in range(20)))],
     [P(i, 1, "p%d" % i) for i in range(16)])

# ---- X-RateLimit-* and the separate fields of the earlier drafts ----
case("X-: reset in seconds",
     [("X-RateLimit-Limit", "60"), ("X-RateLimit-Remaining", "59"), ("X-RateLimit-Reset", "42")],
     x=X(60, 59, 42000))
case("X-: reset as an epoch in seconds (GitHub)",
     [("X-RateLimit-Limit", "5000"), ("X-RateLimit-Remaining", "4999"),
      ("X-RateLimit-Reset", str(NOW // 1000 + 3600))],
     x=X(5000, 4999, 3600000))
case("X-: reset as an epoch in milliseconds",
     [("X-RateLimit-Reset", str(NOW + 1500))], x=X(None, None, 1500))
case("X-: an epoch in the past is 0",
     [("X-RateLimit-Reset", str(NOW // 1000 - 10))], x=X(None, None, 0))
case("X-: fractional seconds round up to the millisecond",
     [("X-RateLimit-Reset", "1.2345")], x=X(None, None, 1235))
case("X-: a fractional epoch (seconds)",
     [("X-RateLimit-Reset", "%d.250" % (NOW // 1000 + 2))], x=X(None, None, 2250))
case("X-: a limit with a policy after it reads its leading integer",
     [("X-RateLimit-Limit", "100, 100;w=60")], x=X(100))
case("X-: a negative remaining reads as 0",
     [("X-RateLimit-Remaining", "-3")], x=X(None, 0))
case("X-: surrounding whitespace",
     [("x-ratelimit-limit", "  7 "), ("X-RATELIMIT-REMAINING", "\t3")], x=X(7, 3))
case("X-: a number too large for 64 bits is ignored",
     [("X-RateLimit-Limit", "99999999999999999999"), ("X-RateLimit-Remaining", "5")],
     x=X(None, 5))
case("the earlier drafts' RateLimit-Limit/-Remaining/-Reset",
     [("RateLimit-Limit", "10"), ("RateLimit-Remaining", "4"), ("RateLimit-Reset", "9")],
     x=X(10, 4, 9000))
case("X- wins over the earlier drafts' fields",
     [("RateLimit-Limit", "10"), ("X-RateLimit-Limit", "20"), ("X-RateLimit-Remaining", "1")],
     x=X(20, 1))
case("a repeated singleton: the first line",
     [("X-RateLimit-Remaining", "5"), ("X-RateLimit-Remaining", "3")], x=X(None, 5))

# ---- Retry-After ----
case("Retry-After: seconds", [("Retry-After", "120")], retry_after_ms=120000)
case("Retry-After: 0", [("Retry-After", "0")], retry_after_ms=0)
case("Retry-After: fractional seconds, tolerated", [("Retry-After", " 1.5 ")],
     retry_after_ms=1500)
case("Retry-After: IMF-fixdate", [("Retry-After", "Tue, 01 Dec 2026 12:01:30 GMT")],
     retry_after_ms=90000)
case("Retry-After: RFC 850 date", [("Retry-After", "Tuesday, 01-Dec-26 12:00:05 GMT")],
     retry_after_ms=5000)
case("Retry-After: asctime date", [("Retry-After", "Tue Dec  1 12:00:10 2026")],
     retry_after_ms=10000)
case("Retry-After: a date in the past is 0", [("Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT")],
     retry_after_ms=0)
case("Retry-After: a negative number is ignored", [("Retry-After", "-5")])
case("Retry-After: more milliseconds than 64 bits hold read as 2^63 - 1",
     [("Retry-After", "9223372036854775807")], retry_after_ms=2**63 - 1)
case("Retry-After: seconds past 64 bits are ignored",
     [("Retry-After", "9223372036854775808")])
case("Retry-After: a malformed date is ignored", [("Retry-After", "Tue, 32 Dec 2026 12:00:00 GMT")])

# ---- bounds ----
case("a value over 4096 bytes is ignored, whatever its field",
     [("X-RateLimit-Limit", " " * 4100 + "100"), ("X-RateLimit-Remaining", "5"),
      ("Retry-After", "1" + " " * 4100),
      ("RateLimit-Policy", '"a";q=10;w=1,' + " " * 4100 + '"b";q=20;w=1')],
     x=X(None, 5, None))
case("an X- field over 4096 bytes is there, and invalid",
     [("X-RateLimit-Limit", "100" + " " * 4100)], x=X(None, None, None))
case("a value of 4096 bytes is read",
     [("X-RateLimit-Remaining", " " * 4093 + "5"), ("Retry-After", "2" + " " * 4095)],
     x=X(None, 5, None), retry_after_ms=2000)

throttle = [
    {"name": "allowed", "reply": [0, 16, 15, -1, 2],
     "expect": {"allowed": True, "limit": 16, "remaining": 15, "retry_after_ms": None,
                "reset_ms": 2000}},
    {"name": "limited", "reply": [1, 16, 0, 3, 60],
     "expect": {"allowed": False, "limit": 16, "remaining": 0, "retry_after_ms": 3000,
                "reset_ms": 60000}},
    {"name": "never: a quantity above the burst", "reply": [1, 16, 16, -1, 0],
     "expect": {"allowed": False, "limit": 16, "remaining": 16, "retry_after_ms": None,
                "reset_ms": 0}},
    {"name": "not five integers", "reply": [0, 16, 15], "expect": None},
    {"name": "a string where an integer goes", "reply": [0, "16", 15, -1, 2], "expect": None},
    {"name": "limited is 0 or 1", "reply": [2, 16, 15, -1, 2], "expect": None},
]

with open("ratelimit_headers.json", "w") as f:
    json.dump({"headers": cases, "throttle": throttle}, f, indent=1, ensure_ascii=False)
    f.write("\n")
print(len(cases), "header cases,", len(throttle), "reply cases")
