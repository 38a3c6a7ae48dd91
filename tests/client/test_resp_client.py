"""The C RESP client (libsluice_client, include/sluice_resp.h) against a real sluiced.

tests/client/resp_driver runs each call through the blocking client (sl_rc_*) or the
async one on libuv (sl_rc_async_*) and prints what it got. Every call is checked
against redis-py:

- through a Tap (conftest.py) between the driver and sluiced: the bytes the C client
  sent are exactly the bytes redis-py sends for the documented command, and each answer
  is exactly what redis-py reads from the very same reply bytes (every field, the
  durations converted from milliseconds, an error's text the server's own);
- against a twin sluiced that redis-py sends the same sequence to: the same decisions,
  in the fields that do not move with the clock (allowed, limit, remaining, which limit
  refused, a lease granted or not, counts, error texts).

Then the failures: a wrong password, a server refusing connections, a connection that
cannot be made in time, the server gone with a pipeline outstanding (every callback
once, with the error), the context freed with calls pending, and a long pipeline
answered in order. No test waits on a clock: the driver is sent lines and answers them.
"""

import os
import signal
import socket
import uuid

import pytest
import redis

from conftest import Stopped, Tap, free_port, redis_py_commands, redis_py_replies

NEVER = 2**63 - 1
SL_RC_ERR_IO, SL_RC_ERR_SERVER, SL_RC_ERR_CLOSED = 1, 2, 6
MS = 1000000


def sequence(p):
    """The calls, phase by phase (the releases need the leases of the phase before):
    (driver op, its arguments). p prefixes every key."""
    first = [
        ("take", p + "g", 3, 3600000, 0, 1, "gcra"),
        ("take", p + "g", 3, 3600000, 0, 1, "gcra"),
        ("take", p + "g", 3, 3600000, 0, 1, "gcra"),
        ("take", p + "g", 3, 3600000, 0, 1, "gcra"),
        ("peek", p + "g", 3, 3600000, 0, 0, "gcra"),
        ("take", p + "tb", 2, 60000, 0, 1, "token_bucket"),
        ("take", p + "lb", 2, 60000, 0, 1, "leaky_bucket"),
        ("take", p + "lb", 2, 60000, 0, 1, "leaky_bucket"),
        ("take", p + "fw", 2, 60000, 5, 1, "fixed_window"),
        ("take", p + "sl", 2, 60000, 0, 1, "sliding_log"),
        ("take", p + "sw", 2, 60000, 0, 1, "sliding_window"),
        ("take", p + "big", 2, 60000, 0, 5, "gcra"),
        ("take", p + "bad", 0, 60000, 0, 1, "gcra"),
        ("take", p + "g", 3, 3600000, 0, 1, "token_bucket"),
        ("throttle", p + "c", 15, 30, 60, 1),
        ("throttle", p + "c2", 1, 1, 3600, 1),
        ("throttle", p + "c2", 1, 1, 3600, 1),
        ("throttle", p + "c2", 1, 1, 3600, 1),
        ("throttle", p + "c3", 1, 1, 60, 5),
        ("throttle", p + "c4", -1, 1, 60, 1),
        ("takemany", [(p + "u", 100, 60000, 0, 1, "gcra"), (p + "x", 1, 60000, 0, 2, "gcra")]),
        ("takemany", [(p + "k", 3, 60000, 0, 2, "gcra"), (p + "k", 3, 60000, 0, 2, "gcra")]),
        ("takemany", [(p + "m1", 5, 60000, 0, 1, "sliding_window"),
                      (p + "m2", 5, 60000, 0, 1, "fixed_window")]),
        ("policy", "api", p + "user", 1, 0),
        ("policy", "api", p + "user", 1, 0, "paid"),
        ("policy", "api", p + "user", 1, 0),
        ("policy", "dry", p + "d", 1, 0),
        ("policy", "dry", p + "d", 1, 0),
        ("policy", "nope", p + "n", 1, 0),
        ("reset", p + "g", p + "never"),
        ("reset", p + "g"),
        ("acquire", p + "l", 1, 60000, 1),
        ("acquire", p + "l", 1, 60000, 1),
        ("acquire", p + "l", 2, 60000, 3),
        ("adaptive", p + "ad", 8, 60000, "vegas", "critical"),
        ("adaptive", p + "ad2", 8, 60000, "-", "-"),
    ]
    return first


def release_phase(p, leases):
    """The second phase: each lease granted in the first released, then released again
    (0: already gone), and an id that was never given."""
    calls = []
    for key, lease in leases:
        calls.append(("release", key, lease))
        calls.append(("release", key, lease))
    calls.append(("release", p + "l", "ffffffffffffffffffffffff"))
    return calls


def line(client, call):
    op = call[0]
    if op == "takemany":
        groups = call[1]
        return "%s takemany %d %s" % (client, len(groups), " ".join(
            " ".join(str(x) for x in g) for g in groups))
    return "%s %s" % (client, " ".join(str(x) for x in call))


def limit_args(limit, period_ms, burst, cost, alg):
    out = [str(limit), "%dms" % period_ms]
    if burst:
        out += ["BURST", str(burst)]
    out += ["COST", str(cost)]
    if alg != "gcra":
        out += ["ALGORITHM", alg]
    return out


def command(call):
    """The documented command for a call, as redis-py is given it."""
    op = call[0]
    if op in ("take", "peek"):
        return ["SL." + op.upper(), call[1]] + limit_args(*call[2:])
    if op == "throttle":
        return ["CL.THROTTLE"] + [str(x) for x in call[1:]]
    if op == "policy":
        c = ["SL.POLICY", call[1], call[2], "COST", str(call[3])]
        if call[4]:
            c += ["TOKENS", str(call[4])]
        if len(call) > 5:
            c += ["TIER", call[5]]
        return c
    if op == "takemany":
        groups = call[1]
        c = ["SL.TAKEMANY", str(len(groups))] + [g[0] for g in groups]
        for g in groups:
            c += ["LIMIT"] + limit_args(*g[1:])
        return c
    if op == "reset":
        return ["SL.RESET"] + list(call[1:])
    if op == "acquire":
        c = ["SL.ACQUIRE", call[1], str(call[2]), str(call[3])]
        return c + (["WEIGHT", str(call[4])] if call[4] else [])
    if op == "adaptive":
        c = ["SL.ACQUIRE", call[1], str(call[2]), str(call[3]), "ADAPTIVE"]
        if call[4] != "-":
            c += ["ESTIMATOR", call[4]]
        if call[5] != "-":
            c += ["PRIORITY", call[5]]
        return c
    if op == "release":
        return ["SL.RELEASE", call[1], call[2]]
    raise AssertionError(op)


def s(v):
    return v.decode() if isinstance(v, bytes) else v


def ns(ms):
    return ms * MS


def decision(reply):
    """A decision reply (as redis-py reads it) as the driver prints a decision."""
    f = {s(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}
    allowed = f["allowed"] == 1
    retry = f["retry_after_ms"]
    return {"allowed": allowed, "limit": f["limit"], "remaining": f["remaining"],
            "retry_after_ns": 0 if allowed else NEVER if retry == -1 else ns(retry),
            "reset_after_ns": ns(f["reset_after_ms"]), "delay_ns": ns(f.get("delay_ms", 0))}


def expected(call, reply, raw_error=None):
    """What the driver must print for a call whose reply redis-py read as `reply`."""
    op = call[0]
    if isinstance(reply, redis.exceptions.ResponseError):
        return {"err": SL_RC_ERR_SERVER, "errstr": raw_error}
    if op in ("take", "peek"):
        return {"err": 0, "d": decision(reply)}
    if op == "throttle":
        limited, limit, remaining, retry, reset = reply
        allowed = limited == 0
        return {"err": 0, "d": {"allowed": allowed, "limit": limit, "remaining": remaining,
                                "retry_after_ns": 0 if allowed else NEVER if retry == -1
                                else retry * 10**9,
                                "reset_after_ns": reset * 10**9, "delay_ns": 0}}
    if op == "policy":
        f = {s(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}
        return {"err": 0, "d": decision(reply),
                "info": {"rejected_by": f["rejected_by"], "global": s(f["scope"]) == "global",
                         "binding": s(f["binding"]), "shadow": f.get("shadow", 0) == 1}}
    if op == "takemany":
        f = {s(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}
        return {"err": 0, "rejected_by": f["rejected_by"],
                "d": [decision(r) for r in f["results"]]}
    if op in ("reset", "release"):
        return {"err": 0, "count": reply}
    if op in ("acquire", "adaptive"):
        return {"err": 0, "granted": reply is not None, "lease": s(reply) if reply else ""}
    raise AssertionError(op)


def error_lines(data):
    """The text of each error reply in a server's bytes, in order (a RESP2 error is one
    line starting with '-', at the top level of these replies)."""
    return [l[1:].decode() for l in data.split(b"\r\n") if l.startswith(b"-")]


def strip(answer):
    return {k: v for k, v in answer.items()
            if k not in ("id", "client", "op", "queued_ms", "answered_ms")}


STABLE = ("allowed", "limit", "remaining")


def stable(a):
    """The fields of an answer that do not move with the clock."""
    out = {k: v for k, v in a.items() if k in ("err", "errstr", "rejected_by", "count", "granted")}
    if "d" in a:
        ds = a["d"] if isinstance(a["d"], list) else [a["d"]]
        out["d"] = [{k: d[k] for k in STABLE} for d in ds]
    if "info" in a:
        out["info"] = a["info"]
    return out


def run_phases(drv, client, p, pipelined):
    """Runs the sequence on one client; returns [(call, answer)]. The async client gets
    each phase in one write (a pipeline); the blocking one a line at a time."""
    done = []

    def run(calls):
        if pipelined:
            drv.send(*[line(client, c) for c in calls])
            got = [drv.answer() for _ in calls]
        else:
            got = [drv.call(line(client, c)) for c in calls]
        assert [a["id"] for a in got] == sorted(a["id"] for a in got)
        done.extend(zip(calls, got))
        return got

    first = sequence(p)
    got = run(first)
    leases = [(c[1], a["lease"]) for c, a in zip(first, got)
              if c[0] in ("acquire", "adaptive") and a.get("granted")]
    assert len(leases) == 3, got
    run(release_phase(p, leases))
    return done


@pytest.mark.parametrize("client", ["s", "a"])
def test_every_call_as_redis_py_reads_it(make_sluiced, make_driver, client):
    srv = make_sluiced()
    tap = Tap(srv.port)
    drv = make_driver(tap.port)
    assert drv.call("%s connect" % client)["err"] == 0
    p = "%s:%s:" % (client, uuid.uuid4().hex[:8])
    done = run_phases(drv, client, p, pipelined=client == "a")
    drv.close()
    tap.close()

    # What went on the wire: redis-py's bytes for the documented commands.
    conn = tap.conn(0)
    assert conn["sent"] == redis_py_commands(*[command(c) for c, _ in done])
    # What came back, read by redis-py: the driver's answers, field for field.
    replies = redis_py_replies(conn["answered"], len(done))
    errors = iter(error_lines(conn["answered"]))
    for (call, answer), reply in zip(done, replies):
        raw = next(errors) if isinstance(reply, redis.exceptions.ResponseError) else None
        assert strip(answer) == expected(call, reply, raw), (call, answer, reply)
        if raw:
            # The server's words, which redis-py shows without its "ERR " code.
            assert answer["errstr"].endswith(str(reply))
    # The sequence meets every kind of answer.
    kinds = {(c[0], a["err"], a.get("d", {}).get("allowed") if isinstance(a.get("d"), dict)
              else None) for c, a in done}
    for want in [("take", 0, True), ("take", 0, False), ("take", SL_RC_ERR_SERVER, None),
                 ("throttle", 0, False), ("policy", SL_RC_ERR_SERVER, None),
                 ("peek", 0, True)]:
        assert want in kinds, (want, kinds)


@pytest.mark.parametrize("client", ["s", "a"])
def test_the_same_sequence_as_redis_py_sends_it(make_sluiced, make_driver, client):
    """redis-py sends the same sequence to a twin sluiced: the same decisions."""
    ours, twin = make_sluiced(), make_sluiced()
    drv = make_driver(ours.port)
    assert drv.call("%s connect" % client)["err"] == 0
    p = "seq:"
    done = run_phases(drv, client, p, pipelined=client == "a")
    r = twin.redis()
    theirs = []
    leases = []
    for call, _ in done:
        if call[0] == "release" and call[2] != "f" * 24:
            # redis-py's own lease for that key, granted by the twin.
            call = ("release", call[1], [l for k, l in leases if k == call[1]][0])
        try:
            exp = expected(call, r.execute_command(*command(call)))
        except redis.exceptions.ResponseError as e:
            exp = {"err": SL_RC_ERR_SERVER, "exception": e}
        if call[0] in ("acquire", "adaptive") and exp.get("granted"):
            leases.append((call[1], exp["lease"]))
        theirs.append(exp)
    for (call, answer), exp in zip(done, theirs):
        got = stable(strip(answer))
        if "exception" in exp:
            # The same refusal; redis-py shows it without its leading "ERR ".
            assert got["err"] == SL_RC_ERR_SERVER, (call, answer)
            assert got["errstr"].endswith(str(exp["exception"])), (call, answer, exp)
            continue
        assert got == stable(exp), (call, answer, exp)
    assert len(theirs) == len(done) > 30
    r.close()


def test_error_texts_are_the_servers(make_sluiced, make_driver):
    srv = make_sluiced()
    drv = make_driver(srv.port)
    drv.call("s connect")
    drv.call("a connect")
    r = srv.redis()
    cases = [("take k 0 60000 0 1 gcra", ["SL.TAKE", "k", "0", "60000ms", "COST", "1"]),
             ("policy nope k 1 0", ["SL.POLICY", "nope", "k", "COST", "1"]),
             ("throttle k -1 1 60 1", ["CL.THROTTLE", "k", "-1", "1", "60", "1"])]
    for args, cmd in cases:
        with pytest.raises(redis.exceptions.ResponseError) as e:
            r.execute_command(*cmd)
        with socket.create_connection(("127.0.0.1", srv.port)) as raw:
            raw.sendall(redis_py_commands(cmd))
            text = raw.recv(4096).decode()
        assert text.startswith("-") and text.endswith("\r\n")
        for client in "sa":
            a = drv.call("%s %s" % (client, args))
            assert a["err"] == SL_RC_ERR_SERVER, a
            assert a["errstr"] == text[1:-2], (a, text)
            assert a["errstr"].endswith(str(e.value))
    # An error leaves the connection in step: the next call is answered.
    for client in "sa":
        assert drv.call("%s take ok:%s 1 60000 0 1 gcra" % (client, client))["d"]["allowed"] is True
    r.close()


def test_a_wrong_password(make_sluiced, make_driver):
    srv = make_sluiced(password="s3cret")
    with socket.create_connection(("127.0.0.1", srv.port)) as raw:
        raw.sendall(redis_py_commands(["AUTH", "wrong"]))
        wrongpass = raw.recv(4096).decode()[1:-2]
        raw.sendall(redis_py_commands(["SL.TAKE", "k", "1", "1000ms", "COST", "1"]))
        noauth = raw.recv(4096).decode()[1:-2]
    assert wrongpass.startswith("WRONGPASS") and noauth.startswith("NOAUTH")
    with pytest.raises(redis.exceptions.ResponseError) as e:
        redis.Redis(host="127.0.0.1", port=srv.port, password="wrong").ping()
    drv = make_driver(srv.port)

    # Blocking: AUTH refused with the server's text, and the context goes on, refused.
    a = drv.call("s connect wrong")
    assert a["err"] == SL_RC_ERR_SERVER and a["errstr"] == wrongpass, a
    assert str(e.value) in a["errstr"]
    a = drv.call("s take k 1 1000 0 1 gcra")
    assert a["err"] == SL_RC_ERR_SERVER and a["errstr"] == noauth, a
    assert drv.call("s auth s3cret")["err"] == 0
    assert drv.call("s take k 1 1000 0 1 gcra")["d"]["allowed"] is True

    # Async: every call queued behind the refused AUTH is answered once, with why.
    assert drv.call("a connect wrong")["err"] == 0  # the connection is still being made
    drv.send(*["a take k%d 1 1000 0 1 gcra" % i for i in range(5)])
    got = [drv.answer() for _ in range(5)]
    assert [x["id"] for x in got] == sorted(x["id"] for x in got)
    for x in got:
        assert x["err"] == SL_RC_ERR_SERVER and x["errstr"] == "AUTH refused: " + wrongpass, x
    a = drv.call("a take k 1 1000 0 1 gcra")
    assert a["queued"] is False and a["errstr"] == "AUTH refused: " + wrongpass, a
    assert drv.call("a connect s3cret")["err"] == 0
    assert drv.call("a take k2 1 1000 0 1 gcra")["d"]["allowed"] is True


def test_nothing_listening(make_driver):
    port = free_port()
    drv = make_driver(port)
    a = drv.call("s connect")
    assert a["err"] == SL_RC_ERR_IO
    assert a["errstr"] == "cannot connect to 127.0.0.1:%d: Connection refused" % port, a
    # Every later call says the same, without trying again.
    a = drv.call("s take k 1 1000 0 1 gcra")
    assert a["err"] == SL_RC_ERR_IO and "Connection refused" in a["errstr"]
    # Async: the refusal reaches the calls queued on the connection being made.
    assert drv.call("a connect")["err"] == 0
    drv.send("a take k 1 1000 0 1 gcra", "a throttle k 1 1 1 1")
    for _ in range(2):
        a = drv.answer()
        assert a["err"] == SL_RC_ERR_IO, a
        assert a["errstr"] == "cannot connect to 127.0.0.1:%d: Connection refused" % port, a
    a = drv.call("a take k 1 1000 0 1 gcra")
    assert a["queued"] is False and a["err"] == SL_RC_ERR_IO


def test_a_connection_that_cannot_be_made_in_time(make_driver):
    """A listener whose accept queue is full drops new SYNs: the connect hangs until the
    client's own time limit ends it."""
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(0)
    port = lst.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            f = socket.socket()
            f.setblocking(False)
            f.connect_ex(("127.0.0.1", port))
            fillers.append(f)
        drv = make_driver(port, "--timeout-ms", 300)
        a = drv.call("s connect")
        if a["err"] == 0:
            pytest.skip("this kernel completed the connection despite the full queue")
        assert a["err"] == SL_RC_ERR_IO and a["errstr"].startswith(
            "cannot connect to 127.0.0.1:%d: " % port), a
        drv.call("a connect")
        a = drv.call("a take k 1 1000 0 1 gcra")
        assert a["err"] == SL_RC_ERR_IO, a
        assert a["errstr"] == ("cannot connect to 127.0.0.1:%d: no connection within 300 ms"
                               % port), a
    finally:
        for f in fillers:
            f.close()
        lst.close()


def test_server_gone_mid_pipeline(make_sluiced, make_driver):
    """sluiced stopped (SIGSTOP) with a pipeline queued, then killed: each call's callback
    comes once, with the connection's error, in order; later calls are refused at once."""
    srv = make_sluiced()
    drv = make_driver(srv.port)
    drv.call("s connect")
    drv.call("a connect")
    assert drv.call("a take warm 5 60000 0 1 gcra")["d"]["allowed"] is True
    assert drv.call("s take warm 5 60000 0 1 gcra")["d"]["allowed"] is True
    n = 300
    try:
        with Stopped(srv):
            queued = drv.call("a pipeline %d take gone 1000 60000 0 1 gcra" % n)
            assert queued == {"queued": n}
            os.kill(srv.proc.pid, signal.SIGKILL)
    finally:
        os.kill(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait(timeout=30)
    got = [drv.answer() for _ in range(n)]
    ids = [a["id"] for a in got]
    assert ids == list(range(ids[0], ids[0] + n))  # each once, in order
    for a in got:
        assert a["err"] == SL_RC_ERR_IO, a
        assert a["errstr"].startswith("connection to 127.0.0.1:%d lost" % srv.port), a
    a = drv.call("a take k 1 1000 0 1 gcra")
    assert a["queued"] is False and a["err"] == SL_RC_ERR_IO
    # The blocking client finds out at its next call, and stays dead.
    a = drv.call("s take k 1 1000 0 1 gcra")
    assert a["err"] == SL_RC_ERR_IO and a["errstr"].startswith(
        "connection to 127.0.0.1:%d lost" % srv.port), a
    again = drv.call("s take k 1 1000 0 1 gcra")
    assert again["err"] == SL_RC_ERR_IO and again["errstr"] == a["errstr"]
    rest = drv.close()
    assert rest == []  # nothing answered twice, nothing left over


def test_freed_with_calls_pending(make_sluiced, make_driver):
    srv = make_sluiced()
    drv = make_driver(srv.port)
    drv.call("a connect")
    assert drv.call("a take warm 5 60000 0 1 gcra")["err"] == 0
    with Stopped(srv):
        assert drv.call("a pipeline 50 take held 10 60000 0 1 gcra") == {"queued": 50}
        drv.send("a free")
        got = [drv.answer() for _ in range(50)]
        assert drv.answer() == {"freed": True}
    assert [a["err"] for a in got] == [SL_RC_ERR_CLOSED] * 50
    ids = [a["id"] for a in got]
    assert ids == list(range(ids[0], ids[0] + 50))
    # The server, once resumed, serves on.
    drv.call("s connect")
    assert drv.call("s take after 1 60000 0 1 gcra")["d"]["allowed"] is True
    # And a new async context does too.
    drv.call("a connect")
    assert drv.call("a take after2 1 60000 0 1 gcra")["d"]["allowed"] is True


def test_a_long_pipeline_keeps_order(make_sluiced, make_driver):
    srv = make_sluiced()
    drv = make_driver(srv.port)
    drv.call("a connect")
    n = 2000
    assert drv.call("a pipeline %d take order 1500 3600000 0 1 gcra" % n) == {"queued": n}
    got = [drv.answer() for _ in range(n)]
    ids = [a["id"] for a in got]
    assert ids == list(range(ids[0], ids[0] + n))
    # Answered in the order sent: the remaining count falls by one per call, and the
    # calls past the limit are the refused ones.
    assert [a["d"]["remaining"] for a in got[:1500]] == list(range(1499, -1, -1))
    assert [a["d"]["allowed"] for a in got] == [True] * 1500 + [False] * 500
    # The server saw one connection with every command on it.
    r = srv.redis()
    assert r.execute_command("SL.PEEK", "order", 1500, "3600000ms", "COST", 0)[5] == 0
    r.close()


def test_the_socket_handed_over(make_sluiced, make_driver):
    """sl_rc_free_keep_fd: an authenticated socket handed over (sluice bench's way)."""
    srv = make_sluiced(password="pw")
    drv = make_driver(srv.port)
    assert drv.call("s connect pw")["err"] == 0
    a = drv.call("s fd")
    assert a["fd"] >= 0 and a["ping"] == "+PONG\r\n", a
    assert drv.call("s connect pw")["err"] == 0
    assert drv.call("s take k 1 1000 0 1 gcra")["d"]["allowed"] is True


def test_a_server_that_is_not_resp(make_driver):
    """Bytes that are not RESP end the connection, saying so, for both clients."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    import threading

    def serve():
        for _ in range(2):
            try:
                c, _ = srv.accept()
            except OSError:
                return
            with c:
                c.recv(4096)
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        drv = make_driver(port)
        assert drv.call("s connect")["err"] == 0
        a = drv.call("s take k 1 1000 0 1 gcra")
        assert a["err"] == SL_RC_ERR_IO, a
        assert a["errstr"].startswith("127.0.0.1:%d answered SL.TAKE with bytes that are not "
                                      "RESP: " % port), a
        drv.call("a connect")
        a = drv.call("a take k 1 1000 0 1 gcra")
        assert a["err"] == SL_RC_ERR_IO, a
        assert a["errstr"].startswith("127.0.0.1:%d answered with bytes that are not RESP: "
                                      % port), a
        drv.close()
    finally:
        srv.close()
        t.join(timeout=5)
