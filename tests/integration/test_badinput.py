"""Bad input on raw sockets, one connection each: a clear error (or a silent close for a
client that went away mid-frame), and afterwards the server still answers PING on a
fresh connection and what was stored before is intact."""

import random
import time

import pytest

from respclient import Conn, Error, TimedOut, Closed, as_map

CANARY_ARGS = (10, 3600)


@pytest.fixture(scope="module")
def canary(server):
    """A key drained to 6 of 10 before any bad input, checked after each case."""
    key = "badinput:canary"
    with server.conn() as c:
        d = as_map(c.call("SL.TAKE", key, *CANARY_ARGS, "COST", 4))
        assert (d["allowed"], d["remaining"]) == (1, 6)
        c.call("CL.THROTTLE", key + ":cell", 9, 10, 3600, 3)
    return key


def check_intact(server, canary):
    server.assert_serving()
    with server.conn() as c:
        d = as_map(c.call("SL.PEEK", canary, *CANARY_ARGS, "COST", 0))
        assert d["remaining"] == 6, "stored state changed after bad input: %r" % (d,)
        r = c.call("CL.THROTTLE", canary + ":cell", 9, 10, 3600, 0)
        assert r[:3] == [0, 10, 7], r


# a command past the size cap: the cap's flag and value (the default --max-request-bytes)
TOO_BIG = "request larger than --max-request-bytes (65536)"


def protocol_error(server, data, want=None, timeout=5):
    """Sends data; expects `-ERR Protocol error: ...` then a close, within timeout.
    Returns the message."""
    with Conn(server.host, server.port, timeout=timeout) as c:
        c.send(data)
        t0 = time.monotonic()
        try:
            got = c.wait_closed(timeout)
        except TimedOut:
            pytest.fail("no protocol error and no close within %ss after %r; got %r"
                        % (timeout, data[:80], c.raw_available()[:200]))
        assert got.startswith(b"-ERR Protocol error: ") and got.endswith(b"\r\n"), got
        assert got.count(b"\r\n") == 1, "exactly one reply, then the close: %r" % got
        msg = got[1:-2].decode()
        if want is not None:
            assert msg == "ERR Protocol error: " + want, msg
        return msg, time.monotonic() - t0


@pytest.mark.parametrize("data,want", [
    (b"*-5\r\n", "invalid multibulk length"),
    (b"*-1\r\n", "invalid multibulk length"),
    (b"*99999999999999999999\r\n", "invalid multibulk length"),
    (b"*1x\r\n", "invalid multibulk length"),
    (b"*1\r\n$-2\r\n", "invalid bulk length"),
    (b"*1\r\n$-1\r\n", "invalid bulk length"),
    (b"*1\r\n$99999999999999999999\r\n", TOO_BIG),
    (b"*1\r\n$abc\r\n", "invalid bulk length"),
    (b"*2\r\nX", "expected '$', got 'X'"),
    (b"*1\r\n:1\r\n", "expected '$', got ':'"),
    (b"*1\r\n\xff", "expected '$', got '\\xFF'"),
    (b"*1\r\n$3\r\nPINGx\r\n", "bulk string not terminated by CRLF"),
    (b'ECHO "unbalanced\r\n', "unbalanced quotes in request"),
    (b"ECHO 'a'b\r\n", "unbalanced quotes in request"),
])
def test_protocol_errors(server, canary, data, want):
    msg, _ = protocol_error(server, data)
    # the exact wording: docs/protocol.md (Redis's own for most); the case of \xFF's hex
    # digits is not worth failing over
    assert msg.lower() == ("ERR Protocol error: " + want).lower(), msg
    check_intact(server, canary)


def test_huge_bulk_header_refused_at_once(server, canary):
    # a 600 MB bulk header must not make the server wait for (or allocate) 600 MB
    msg, took = protocol_error(server, b"*1\r\n$600000000\r\n", TOO_BIG, timeout=3)
    assert took < 3
    check_intact(server, canary)


def test_huge_bulk_header_without_line_end(server, canary):
    # refused on its digits, before the CR LF arrives
    protocol_error(server, b"*1\r\n$600000000", TOO_BIG, timeout=3)
    check_intact(server, canary)


def test_huge_multibulk_count(server, canary):
    protocol_error(server, b"*600000000\r\n", "invalid multibulk length", timeout=3)
    check_intact(server, canary)


def test_too_big_inline_request(server, canary):
    # just over the cap, so that the server has read everything we sent when it closes
    # (unread bytes would make the close a reset, which may eat the error reply)
    msg, _ = protocol_error(server, b"A" * (64 * 1024 + 3), TOO_BIG)
    check_intact(server, canary)


def test_too_big_multibulk_request(server, canary):
    # each bulk is under 64 KiB, the whole command is not: refused at the header of the
    # bulk that would end past 64 KiB (we send no more than that header)
    data = b"*3\r\n$4\r\nECHO\r\n$40000\r\n" + b"x" * 40000 + b"\r\n$40000\r\n"
    protocol_error(server, data, TOO_BIG)
    check_intact(server, canary)


def test_a_70_kib_bulk_and_body_name_the_cap(server, canary, make_server):
    # the command layer's words for a bulk past the cap name the flag that sets it
    protocol_error(server, b"*3\r\n$7\r\nSL.TAKE\r\n$71680\r\n" + b"k" * 100, TOO_BIG)
    check_intact(server, canary)
    # --max-request-bytes sets the cap of the HTTP body too
    import requests
    from conftest import free_port
    port = free_port()
    make_server(args=["--http-port", str(port), "--max-request-bytes", "2048"])
    r = requests.post("http://127.0.0.1:%d/v1/check" % port, data=b"{" + b" " * 3000 + b"}")
    assert r.status_code == 413, r.text
    assert r.json()["error"] == "request body larger than --max-request-bytes (2048)", r.text


def test_error_after_good_commands_answers_them_first(server, canary):
    with Conn(server.host, server.port) as c:
        c.send(b"*1\r\n$4\r\nPING\r\nPING\r\n*-5\r\n*1\r\n$4\r\nPING\r\n")
        got = c.wait_closed(5)
        assert got == b"+PONG\r\n+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n", got
    check_intact(server, canary)


@pytest.mark.parametrize("data", [
    b"*1\r\n$3\r\nPIN",                       # close mid-bulk
    b"*3\r\n$11\r\nCL.THROTTLE\r\n$3\r\nke",  # close mid-command
    b"*2\r\n$4\r\nECHO\r\n$10\r\n",           # close after a bulk header
    b"*5",                                   # close mid-count
    b"*1\r",                                 # between CR and LF
    b"PIN",                                  # an inline line never finished
    b"*1\r\n$60000\r\n" + b"z" * 1000,       # a big bulk started, then gone
])
def test_truncated_then_close(server, canary, data):
    with Conn(server.host, server.port, timeout=2) as c:
        c.send(data)
        with pytest.raises(TimedOut):  # waits for the rest, answers nothing
            c.read_reply(0.3)
    check_intact(server, canary)


def test_truncated_then_reset(server, canary):
    import socket
    import struct
    c = Conn(server.host, server.port)
    c.send(b"*3\r\n$11\r\nCL.THROTTLE\r\n$3\r\nke")
    c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()  # RST, not FIN
    check_intact(server, canary)


def test_command_trickling_byte_by_byte(server, canary):
    with Conn(server.host, server.port) as c:
        for b in b"*2\r\n$4\r\nECHO\r\n$5\r\nslow!\r\n":
            c.send(bytes([b]))
        assert c.read_reply() == b"slow!"
    check_intact(server, canary)


def test_binary_garbage(server, canary):
    """Seeded garbage, several buffers, one connection each: every reply is an error (an
    inline line of garbage is an unknown command; a bad frame a protocol error, then the
    close), and the server survives all of them."""
    rng = random.Random(4)
    for n in range(30):
        data = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 3000)))
        if n % 3 == 0:
            data = b"*" + data  # look like a multibulk
        with Conn(server.host, server.port, timeout=2) as c:
            try:
                c.send(data + b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                continue  # closed on an early protocol error while we were sending
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                try:
                    reply = c.read_reply(max(0.05, deadline - time.monotonic()))
                except (TimedOut, Closed):
                    break
                assert isinstance(reply, Error), "garbage %d got a non-error reply %r" % (n, reply)
                if reply.message.startswith("ERR Protocol error"):
                    with pytest.raises((Closed, TimedOut)):
                        c.read_reply(2)
                    break
    check_intact(server, canary)


def test_wrong_types_keep_the_connection(server, canary):
    with server.conn() as c:
        for args in (("CL.THROTTLE", "k", "a", "b", "c"), ("SL.TAKE", "k", "-", "-"),
                     ("SL.TAKEMANY", "z", "k"), ("SL.ACQUIRE", "k", "1e3", "1"),
                     ("ECHO", "a", "b"), ("HELLO", "three")):
            c.send_command(*args)
            e = c.read_reply()
            assert isinstance(e, Error) and e.message.startswith("ERR "), (args, e)
        assert c.call("PING") == "PONG"
    check_intact(server, canary)


def test_many_connections_opened_and_dropped(server, canary):
    conns = []
    try:
        for i in range(200):
            c = Conn(server.host, server.port)
            if i % 2:
                c.send(b"*2\r\n$4\r\nEC")
            conns.append(c)
    finally:
        for c in conns:
            c.close()
    check_intact(server, canary)


# ---- the command faces' arguments, over RESP and HTTP, on one sluiced ----

@pytest.fixture(scope="module")
def faces():
    """A sluiced with both faces and a small --max-key-bytes, so that errors naming
    the longest key can be seen."""
    import shutil
    from conftest import Sluiced, free_port
    port = free_port()
    s = Sluiced(args=["--http-port", str(port), "--max-key-bytes", "64"]).start()
    s.base = "http://127.0.0.1:%d" % port
    yield s
    s.stop()
    shutil.rmtree(s.workdir, ignore_errors=True)


BURST_ERROR = ("burst must be a positive integer of at most 2305843009213693951 "
               "(omit it for a burst of the limit)")


def _http(faces, method, query=None, body=None):
    import requests
    if method == "GET":
        return requests.get(faces.base + "/v1/check?" + query, timeout=5)
    return requests.post(faces.base + "/v1/check", data=body, timeout=5,
                         headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("method,arg", [
    ("GET", "key=b0&limit=10&period=60&burst=0"),
    ("GET", "key=b0&limit=10&period=60&burst=0&algorithm=sliding_window"),
    ("POST", '{"key":"b0","limit":10,"period":60,"burst":0}'),
    ("POST", '{"limits":[{"key":"b0","limit":10,"period":60},'
             '{"key":"b1","limit":10,"period":60,"burst":0}]}'),
])
def test_http_burst_zero_is_refused(faces, method, arg):
    r = _http(faces, method, query=arg, body=arg.encode())
    assert r.status_code == 400, r.text
    assert r.json()["error"] == BURST_ERROR, r.text
    assert r.json()["field"] in ("burst", "limits[1].burst"), r.text
    # nothing was taken from b0
    r = _http(faces, "GET", "key=b0&limit=10&period=60&cost=0")
    assert r.status_code == 200 and r.json()["remaining"] == 10, r.text


def test_resp_burst_zero_and_repeated_options_are_refused(faces):
    with faces.conn() as c:
        for args, want in [
                (("SL.TAKE", "b0", 10, 60, "BURST", 0), "ERR " + BURST_ERROR),
                (("SL.TAKE", "b0", 10, 60, "BURST", 3, "BURST", 4),
                 "ERR syntax error: option 'BURST' is given twice"),
                (("SL.TAKE", "b0", 10, 60, "COST", 1, "COST", 2),
                 "ERR syntax error: option 'COST' is given twice"),
                (("SL.TAKE", "b0", 10, 60, "ALGORITHM", "gcra", "algorithm", "token_bucket"),
                 "ERR syntax error: option 'ALGORITHM' is given twice")]:
            c.send_command(*args)
            e = c.read_reply()
            assert isinstance(e, Error) and e.message == want, (args, e)
        d = as_map(c.call("SL.PEEK", "b0", 10, 60, "COST", 0))
        assert d["remaining"] == 10, d


@pytest.mark.parametrize("body,field", [
    ('{"key":"z","limit":012,"period":60}', "limit"),
    ('{"key":"z","limit":1,"period":00}', "period"),
    ('{"key":"z","limit":1,"period":60,"cost":-01}', "cost"),
])
def test_http_json_leading_zeros_are_refused(faces, body, field):
    r = _http(faces, "POST", body=body.encode())
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field, r.text
    assert r.json()["error"].startswith(field + " must not have leading zeros"), r.text


def test_keys_longer_than_the_store_takes_name_the_limit(faces):
    long = "k" * 65
    r = _http(faces, "GET", "key=%s&limit=1&period=60" % long)
    assert r.status_code == 400, r.text
    assert r.json() == {"error": "key is longer than 64 bytes", "field": "key"}, r.text
    r = _http(faces, "POST", body=('{"limits":[{"key":"a","limit":1,"period":60},'
                                   '{"key":"%s","limit":1,"period":60}]}' % long).encode())
    assert r.status_code == 400 and r.json()["field"] == "limits[1].key", r.text
    assert r.json()["error"] == "key is longer than 64 bytes", r.text
    with faces.conn() as c:
        for args in (("SL.TAKE", long, 1, 60), ("SL.TAKEMANY", 1, long, "LIMIT", 1, 60),
                     ("SL.ACQUIRE", long, 1, 1000), ("CL.THROTTLE", long, 1, 1, 60)):
            c.send_command(*args)
            e = c.read_reply()
            assert isinstance(e, Error), (args, e)
            assert e.message == "ERR key is empty or too long (at most 64 bytes)", (args, e)
        assert c.call("SL.TAKE", "k" * 64, 1, 60)[1] == 1


def test_algorithm_names_ignore_case_in_every_face(faces):
    r = _http(faces, "GET", "key=alg&limit=10&period=60&algorithm=Token_Bucket")
    assert r.status_code == 200 and r.json()["remaining"] == 9, r.text
    r = _http(faces, "POST", body=b'{"key":"alg","limit":10,"period":60,"algorithm":"TOKEN_BUCKET"}')
    assert r.status_code == 200 and r.json()["remaining"] == 8, r.text
    with faces.conn() as c:
        d = as_map(c.call("SL.TAKE", "alg", 10, 60, "ALGORITHM", "token_BUCKET"))
        assert d["remaining"] == 7, d


def test_a_repeated_key_adds_up_in_a_rejected_multi_check(faces):
    """Each entry alone would fit; together the second does not: the second entry's
    answer says so, the first says what it leaves, and nothing is consumed."""
    body = ('{"limits":[{"key":"rep","limit":3,"period":3600,"cost":2},'
            '{"key":"rep","limit":3,"period":3600,"cost":2}]}').encode()
    r = _http(faces, "POST", body=body)
    assert r.status_code == 429, r.text
    j = r.json()
    assert j["rejected_by"] == 1, j
    assert [(x["allowed"], x["remaining"]) for x in j["results"]] == [(True, 1), (False, 1)], j
    assert j["allowed"] is False and j["remaining"] == 1, j
    with faces.conn() as c:
        got = as_map(c.call("SL.TAKEMANY", 2, "rep", "rep", "LIMIT", 3, 3600, "COST", 2,
                            "LIMIT", 3, 3600, "COST", 2))
        assert (got["allowed"], got["rejected_by"]) == (0, 1), got
        assert [(as_map(x)["allowed"], as_map(x)["remaining"]) for x in got["results"]] \
            == [(1, 1), (0, 1)], got
        assert as_map(c.call("SL.PEEK", "rep", 3, 3600, "COST", 0))["remaining"] == 3


def test_acquire_tells_a_weight_that_never_fits_from_full(faces):
    with faces.conn() as c:
        c.send_command("SL.ACQUIRE", "pool", 2, 10000, "WEIGHT", 3)
        e = c.read_reply()
        assert isinstance(e, Error) and e.message == "ERR weight 3 exceeds max_in_flight 2", e
        assert c.call("SL.ACQUIRE", "pool", 2, 10000, "WEIGHT", 2) is not None
        assert c.call("SL.ACQUIRE", "pool", 2, 10000) is None  # full: the fixed null


def test_cl_throttle_zero_rate_in_redis_cells_words(faces):
    with faces.conn() as c:
        for args in (("CL.THROTTLE", "zr", 1, 0, 60), ("CL.THROTTLE", "zr", 1, 1, 0)):
            c.send_command(*args)
            e = c.read_reply()
            assert isinstance(e, Error), e
            assert e.message == "Cell error: Zero rates are not supported", e
