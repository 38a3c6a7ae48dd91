"""One limit across a fleet: several sluiced on one central Redis (--store redis://),
through sluice-redis.so when Redis has it loaded and through the Lua script when it
has not. Real redis-server, real sluiced processes, real clients, 127.0.0.1 only."""

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import Sluiced
from harness import free_port

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from redis_server import RedisServer  # noqa: E402

ALGORITHMS = ["gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_log",
              "sliding_window"]


@pytest.fixture(params=["module", "script"])
def engine(request):
    return request.param


@pytest.fixture
def redis_store(engine, tmp_path):
    """A redis-server: with the module for "module", without it for "script"."""
    s = RedisServer(str(tmp_path / "redis"), module=(engine == "module"),
                    args=["--enable-debug-command", "yes"]).start()
    yield s
    s.stop()


def start_sluiced(tmp_path, store_url, extra=(), http=True, name="s"):
    args = ["--store", store_url] + list(extra)
    if "--store-timeout-ms" not in args:
        # A budget no check misses on a loaded machine (ASan, two cores): these tests
        # count the store's decisions; those of a store that is late have their own.
        args += ["--store-timeout-ms", "2000"]
    port = None
    if http:
        port = free_port()
        args += ["--http-port", str(port)]
    s = Sluiced(args=args, workdir=str(tmp_path / name))
    os.makedirs(s.workdir, exist_ok=True)
    s.start()
    s.http_port = port
    return s


@pytest.fixture
def fleet(redis_store, tmp_path):
    """Three sluiced on the one Redis."""
    url = "redis://127.0.0.1:%d" % redis_store.port
    nodes = [start_sluiced(tmp_path, url, name="s%d" % i) for i in range(3)]
    yield redis_store, nodes
    for n in nodes:
        if n.alive():
            n.stop()


def http_get(node, path):
    c = http.client.HTTPConnection("127.0.0.1", node.http_port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"{}")
    finally:
        c.close()


def as_map(reply):
    return {reply[i].decode() if isinstance(reply[i], bytes) else reply[i]: reply[i + 1]
            for i in range(0, len(reply), 2)}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_burst_over_three_nodes_admits_exactly_the_limit(fleet, algorithm):
    _, nodes = fleet
    clients = [n.redis() for n in nodes]
    allowed = 0
    for i in range(30):
        reply = clients[i % 3].execute_command("SL.TAKE", "burst:" + algorithm, 10, "1h",
                                               "ALGORITHM", algorithm)
        allowed += as_map(reply)["allowed"]
    assert allowed == 10
    for c in clients:
        c.close()


def test_cl_throttle_over_three_nodes(fleet):
    _, nodes = fleet
    clients = [n.redis() for n in nodes]
    replies = [clients[i % 3].execute_command("CL.THROTTLE", "cell", 4, 1, 3600)
               for i in range(12)]
    assert [r[0] for r in replies] == [0] * 5 + [1] * 7
    assert replies[0][:3] == [0, 5, 4] and replies[5][:3] == [1, 5, 0]
    assert replies[5][3] > 3000  # one per hour: the next in about an hour


@pytest.mark.parametrize("algorithm", ["gcra", "fixed_window", "sliding_window"])
def test_http_over_three_nodes(fleet, algorithm):
    _, nodes = fleet
    statuses = [http_get(nodes[i % 3], "/v1/check?key=h:%s&limit=5&period=3600&algorithm=%s"
                         % (algorithm, algorithm))[0] for i in range(15)]
    assert statuses.count(200) == 5 and statuses.count(429) == 10


def test_the_same_trace_gives_the_same_decisions_as_memory(redis_store, tmp_path):
    mem = start_sluiced(tmp_path, "memory://", http=False, name="mem")
    far = start_sluiced(tmp_path, "redis://127.0.0.1:%d" % redis_store.port, http=False,
                        name="far")
    try:
        a, b = mem.redis(), far.redis()
        trace = []
        for algorithm in ALGORITHMS:
            for cost in [1, 3, 0, 5, 2, 9, 1]:
                trace.append(("SL.TAKE", "t:" + algorithm, 12, "1h", "COST", cost,
                              "ALGORITHM", algorithm))
        trace += [("CL.THROTTLE", "t:cell", 3, 10, 60, q) for q in [1, 2, 1, 1, 5]]
        trace += [("SL.TAKEMANY", 2, "m:a", "m:b", "LIMIT", 5, "1h", "LIMIT", 3, "1h",
                   "ALGORITHM", "fixed_window")] * 4
        trace += [("SL.PEEK", "t:gcra", 12, "1h", "COST", 4)]
        for cmd in trace:
            x, y = a.execute_command(*cmd), b.execute_command(*cmd)
            if cmd[0] == "CL.THROTTLE":
                assert x[:3] == y[:3], cmd
                assert abs(x[3] - y[3]) <= 1 and abs(x[4] - y[4]) <= 1, (cmd, x, y)
                continue
            if cmd[0] == "SL.TAKEMANY":
                mx, my = as_map(x), as_map(y)
                assert (mx["allowed"], mx["rejected_by"]) == (my["allowed"], my["rejected_by"])
                x, y = mx["results"][0], my["results"][0]
            mx, my = as_map(x), as_map(y)
            for field in ("allowed", "limit", "remaining"):
                assert mx[field] == my[field], (cmd, mx, my)
            # The two clocks are not the same clock: durations agree to within the
            # trace's own time.
            for field in ("retry_after_ms", "reset_after_ms"):
                assert abs(mx[field] - my[field]) <= 2000, (cmd, field, mx, my)
        a.close()
        b.close()
    finally:
        mem.stop()
        far.stop()


def test_leases_over_three_nodes(fleet):
    _, nodes = fleet
    c = [n.redis() for n in nodes]
    l1 = c[0].execute_command("SL.ACQUIRE", "pool", 2, 60000)
    l2 = c[1].execute_command("SL.ACQUIRE", "pool", 2, 60000)
    assert l1 and l2 and l1 != l2
    assert c[2].execute_command("SL.ACQUIRE", "pool", 2, 60000) is None
    assert c[2].execute_command("SL.RELEASE", "pool", l1) == 1
    assert c[2].execute_command("SL.RELEASE", "pool", l1) == 0
    assert c[0].execute_command("SL.ACQUIRE", "pool", 2, 60000) is not None
    assert c[1].execute_command("SL.RESET", "pool", "nothing") == 1


POLICIES = """\
policies:
  api:
    limit: 6
    period: 1h
    tiers:
      paid: {limit: 100, period: 1h}
    global: {limit: 8, period: 1h}
"""


def test_policies_with_a_global_limit_over_two_nodes(redis_store, tmp_path):
    conf = tmp_path / "sluice.yaml"
    conf.write_text(POLICIES)
    url = "redis://127.0.0.1:%d" % redis_store.port
    nodes = [start_sluiced(tmp_path, url, ["--config", str(conf)], name="p%d" % i)
             for i in range(2)]
    try:
        c = [n.redis() for n in nodes]
        got = [as_map(c[i % 2].execute_command("SL.POLICY", "api", "alice"))["allowed"]
               for i in range(10)]
        assert got == [1] * 6 + [0] * 4
        # The global limit (8) binds the next key: two left, then none, on either node.
        got = [as_map(c[i % 2].execute_command("SL.POLICY", "api", "bob", "TIER", "paid"))
               for i in range(3)]
        assert [g["allowed"] for g in got] == [1, 1, 0]
        assert got[2]["rejected_by"] == 1 and got[2]["scope"] == b"global"
        # After a tier change alice's state carries over: 6 used of paid's 100.
        r = as_map(c[1].execute_command("SL.POLICY", "api", "carol", "TIER", "paid"))
        assert r["allowed"] == 0  # the global limit is spent
    finally:
        for n in nodes:
            n.stop()


def info_store(node):
    c = node.redis()
    try:
        return c.info("store")
    finally:
        c.close()


@pytest.mark.parametrize("mode", ["fail_open", "fail_closed", "local"])
def test_a_dead_store_is_decided_by_the_policy(engine, tmp_path, mode):
    if engine == "script":
        pytest.skip("the store's engine does not matter once it is dead")
    redis_store = RedisServer(str(tmp_path / "redis")).start()
    node = start_sluiced(tmp_path, "redis://127.0.0.1:%d" % redis_store.port,
                         ["--on-store-error", mode, "--store-timeout-ms", "50",
                          "--split", "2"], name="dead")
    try:
        c = node.redis()
        assert as_map(c.execute_command("SL.TAKE", "d", 10, "1h"))["allowed"] == 1
        # On a loaded machine that take may itself miss the 50 ms budget, and then the
        # local limiter has counted it.
        local_before = info_store(node)["decisions_local"]
        redis_store.kill()
        answers, took = [], []
        for _ in range(40):
            t0 = time.monotonic()
            answers.append(as_map(c.execute_command("SL.TAKE", "d", 10, "1h")))
            took.append(time.monotonic() - t0)
        allowed = sum(a["allowed"] for a in answers)
        if mode == "fail_open":
            assert allowed == 40
        elif mode == "fail_closed":
            assert allowed == 0
        else:  # a local limiter at limit / --split: 10 / 2
            assert allowed == 5 - local_before, (allowed, local_before, answers)
        st = info_store(node)
        assert st["store_state"] in ("down", "breaker_open")
        assert st["decisions_%s" % mode] >= 35
        # Once the breaker is open no check waits for the store: the slowest of the
        # last 20 took far less than a connect or a timeout would.
        assert max(took[20:]) < 1.0, took
        # Redis back on the same port: sluiced returns to it by itself.
        redis_store.start(port=redis_store.port)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and info_store(node)["store_state"] != "up":
            c.execute_command("SL.TAKE", "probe", 10, "1h")
            time.sleep(0.1)
        assert info_store(node)["store_state"] == "up"
        before = info_store(node)["decisions_%s" % mode]
        assert as_map(c.execute_command("SL.TAKE", "after", 10, "1h"))["allowed"] == 1
        assert info_store(node)["decisions_%s" % mode] == before
        c.close()
    finally:
        node.stop()
        if redis_store.alive():
            redis_store.stop()


@pytest.mark.parametrize("budget_ms", [50, 5000])
def test_replies_keep_their_order_while_the_store_is_slow(redis_store, tmp_path, budget_ms):
    """A pipeline mixing what sluiced answers itself (PING, ECHO) with what Redis decides,
    while Redis sleeps: with a budget longer than the sleep the decisions are Redis's,
    with a shorter one fail_open's, answered before Redis's late replies; either way in
    the pipeline's order."""
    node = start_sluiced(tmp_path, "redis://127.0.0.1:%d" % redis_store.port,
                         ["--store-timeout-ms", str(budget_ms)], http=False, name="order")
    try:
        slow = threading.Thread(target=lambda: redis_store.client().execute_command(
            "DEBUG", "SLEEP", "0.3"))
        slow.start()
        time.sleep(0.05)
        c = node.conn()
        cmds = []
        for i in range(20):
            cmds.append(("PING",))
            cmds.append(("SL.TAKE", "order", 100, "1h"))
            cmds.append(("ECHO", "e%d" % i))
        for cmd in cmds:
            c.send_command(*cmd)
        replies = [c.read_reply() for _ in cmds]
        slow.join()
        for i in range(20):
            assert replies[3 * i] == "PONG"
            assert replies[3 * i + 2] == b"e%d" % i
        decisions = [as_map(replies[3 * i + 1]) for i in range(20)]
        assert all(d["allowed"] == 1 for d in decisions)
        if budget_ms == 5000:
            assert [d["remaining"] for d in decisions] == list(range(99, 79, -1))
        else:
            assert info_store(node)["decisions_fail_open"] >= 1
        c.close()
    finally:
        node.stop()


def test_clients_that_leave_with_decisions_in_flight(fleet):
    redis_store, nodes = fleet
    slow = threading.Thread(target=lambda: redis_store.client().execute_command(
        "DEBUG", "SLEEP", "0.5"))
    slow.start()
    time.sleep(0.05)
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", nodes[0].port))
        s.sendall(b"".join(b"*4\r\n$7\r\nSL.TAKE\r\n$4\r\ngone\r\n$3\r\n100\r\n$2\r\n1h\r\n"
                           b"*1\r\n$4\r\nPING\r\n" for _ in range(50)))
        s.close()
    slow.join()
    c = nodes[0].redis()
    assert c.ping()
    assert as_map(c.execute_command("SL.TAKE", "still", 3, "1h"))["allowed"] == 1
    c.close()
    nodes[0].stop()  # exit 0, no sanitizer report: nothing was freed twice


def test_a_store_that_is_not_redis(tmp_path):
    """A server that answers HTTP to RESP: sluiced says so, decides by the policy, and
    keeps serving."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    stop = threading.Event()

    def serve():
        lsock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = lsock.accept()
            except socket.timeout:
                continue
            try:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n" * 4)
            except OSError:
                pass
            conn.close()

    t = threading.Thread(target=serve)
    t.start()
    try:
        node = start_sluiced(tmp_path, "redis://127.0.0.1:%d" % lsock.getsockname()[1],
                             ["--on-store-error", "fail_closed", "--store-timeout-ms", "50"],
                             name="garbage")
        c = node.redis()
        for _ in range(5):
            r = c.execute_command("SL.TAKE", "g", 10, "1h")
            assert as_map(r)["allowed"] == 0
        assert c.ping()
        c.close()
        node.stop()
    finally:
        stop.set()
        t.join()
        lsock.close()


def test_the_store_password_is_hidden_from_ps(tmp_path):
    """The password in --store's URL (userinfo and ?password=) is masked in the process's
    arguments, the rest of the URL stays readable, and sluiced still authenticates."""
    r = RedisServer(str(tmp_path / "redis"), module=True).start()
    try:
        r.client().config_set("requirepass", "st0re-pw")
        for url in ("redis://default:st0re-pw@127.0.0.1:%d/2" % r.port,
                    "redis://127.0.0.1:%d/2?user=default&password=st0re-pw" % r.port):
            node = start_sluiced(tmp_path, url, ["--on-store-error", "fail_closed"], http=False,
                                 name="pw%d" % len(url))
            with open("/proc/%d/cmdline" % node.proc.pid, "rb") as f:
                args = f.read().split(b"\0")
            shown = [a for a in args if a.startswith(b"redis://")]
            assert shown == [url.replace("st0re-pw", "********").encode()], args
            c = node.redis()
            assert as_map(c.execute_command("SL.TAKE", "pw", 10, "1h"))["allowed"] == 1
            c.close()
            assert r.client(password="st0re-pw", db=2).dbsize() == 1, "the take went to db 2"
            node.stop()
    finally:
        r.stop()


def test_a_key_the_store_holds_for_something_else(redis_store, tmp_path):
    """A key that holds a list or a string in Redis is refused in Redis's words, a sluice
    state of another algorithm in sluice's, on either engine; the connection carries on."""
    r = redis_store.client()
    r.rpush("lst", "a")
    r.set("str", "hello")
    node = start_sluiced(tmp_path, "redis://127.0.0.1:%d" % redis_store.port, http=False,
                         name="wrongtype")
    c = node.redis()
    for key in ("lst", "str"):
        with pytest.raises(Exception) as e:
            c.execute_command("SL.TAKE", key, 10, 60)
        assert "Operation against a key holding the wrong kind of value" in str(e.value), key
    assert as_map(c.execute_command("SL.TAKE", "k", 10, 60))["allowed"] == 1
    with pytest.raises(Exception) as e:
        c.execute_command("SL.TAKE", "k", 10, 60, "ALGORITHM", "fixed_window")
    assert "key holds a state of another algorithm" in str(e.value)
    assert r.lrange("lst", 0, -1) == [b"a"] and r.get("str") == b"hello"
    c.close()
    node.stop()


def test_a_transaction_on_the_store_answers_in_order(fleet):
    _, nodes = fleet
    c = nodes[0].conn()
    assert c.call("MULTI") == "OK"
    for _ in range(3):
        assert c.call("SL.TAKE", "tx", 2, "1h") == "QUEUED"
    assert c.call("PING") == "QUEUED"
    replies = c.call("EXEC")
    assert [as_map(r)["allowed"] for r in replies[:3]] == [1, 1, 0]
    assert replies[3] == "PONG"
    c.close()


def test_http_pipelined_checks_answer_in_order(fleet):
    _, nodes = fleet
    s = socket.create_connection(("127.0.0.1", nodes[0].http_port))
    req = (b"GET /v1/check?key=pipe&limit=5&period=3600 HTTP/1.1\r\nHost: x\r\n\r\n"
           b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    s.sendall(req * 3 + b"HEAD /v1/check?key=pipe&limit=5&period=3600 HTTP/1.1\r\n"
              b"Host: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    heads = [h for h in data.split(b"HTTP/1.1 ")[1:]]
    assert len(heads) == 7
    remaining = [int(h.split(b"X-RateLimit-Remaining: ")[1].split(b"\r\n")[0])
                 for h in heads if b"X-RateLimit-Remaining" in h]
    assert remaining == [4, 3, 2, 1]  # HEAD says what a GET would answer ...
    assert all(b'{"status":"ok"}' in heads[i] for i in (1, 3, 5))
    status, body = http_get(nodes[1], "/v1/check?key=pipe&limit=5&period=3600")
    assert status == 200 and body["remaining"] == 1  # ... and consumed nothing


def test_a_long_pipeline_past_the_in_flight_cap(redis_store, tmp_path):
    """More checks in one pipeline than a connection may have in flight (1024): sluiced
    stops reading at the cap and reads on as Redis answers; every reply comes, in order.
    (A budget long enough for Redis to run 3000 scripts: no store-down decision.)"""
    node = start_sluiced(tmp_path, "redis://127.0.0.1:%d" % redis_store.port,
                         ["--store-timeout-ms", "10000"], http=False, name="long")
    s = socket.create_connection(("127.0.0.1", node.port))
    n = 3000
    one = b"*4\r\n$7\r\nSL.TAKE\r\n$4\r\nlong\r\n$4\r\n5000\r\n$2\r\n1h\r\n"
    s.sendall(one * n + b"*1\r\n$4\r\nQUIT\r\n")
    data = b""
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    s.close()
    remaining = [int(x.split(b"\r\n")[0][1:]) for x in data.split(b"$9\r\nremaining\r\n")[1:]]
    assert remaining == list(range(4999, 4999 - n, -1))
    assert data.endswith(b"+OK\r\n")
    node.stop()


def test_the_store_in_metrics_and_what_only_memory_does(fleet):
    redis_store, nodes = fleet
    node = nodes[0]
    c = node.redis()
    c.execute_command("SL.TAKE", "m", 10, "1h")
    status, _ = http_get(node, "/v1/check?key=m2&limit=10&period=60")
    assert status == 200
    deadline = time.monotonic() + 10
    while True:  # each worker looks at its connection's health every 100 ms
        h = http.client.HTTPConnection("127.0.0.1", node.http_port, timeout=10)
        h.request("GET", "/metrics")
        text = h.getresponse().read().decode()
        h.close()
        if 'sluice_store_up{store="redis"} 1' in text or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert [l for l in text.splitlines() if l.startswith("sluice_store_up")] == [
        'sluice_store_up{store="redis"} 1']
    assert "sluice_store_breaker_open 0" in text
    sent = [l for l in text.splitlines() if l.startswith('sluice_store_requests_total{outcome="sent"}')]
    assert sent and int(sent[0].split()[-1]) >= 2
    assert 'sluice_store_rtt_seconds_bucket{le="+Inf"}' in text
    assert 'sluice_store_fallback_decisions_total{policy="",mode="fail_open"} 0' in text
    # What only the memory store can do says so; DELETE forgets the key in Redis.
    with pytest.raises(Exception, match="not supported by this store"):
        c.execute_command("SL.INSPECT", "m")
    h = http.client.HTTPConnection("127.0.0.1", node.http_port, timeout=10)
    h.request("GET", "/v1/keys/m")
    assert h.getresponse().status == 501
    h.close()
    h = http.client.HTTPConnection("127.0.0.1", node.http_port, timeout=10)
    h.request("DELETE", "/v1/keys/m")
    r = h.getresponse()
    assert r.status == 200 and json.loads(r.read()) == {"reset": True}
    h.close()
    assert redis_store.client().exists("m") == 0
    c.close()


def test_the_local_limiter_puts_windows_on_the_wall_clock(engine, tmp_path):
    """With the store down, --on-store-error local decides on sluiced's own clock,
    and a window on the calendar (a day at -05:00, a month) still ends where the wall
    clock says: the local limiter aligns its windows with the clock it is given, not
    with another one (an offset taken against raw CLOCK_MONOTONIC put them about 3 s
    off). Where each window ends comes from Python's datetime, as in test_calendar."""
    if engine == "script":
        pytest.skip("the store's engine does not matter once it is dead")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "testdata"))
    import calendar_cases as cc
    redis_store = RedisServer(str(tmp_path / "redis")).start()
    node = start_sluiced(tmp_path, "redis://127.0.0.1:%d" % redis_store.port,
                         ["--on-store-error", "local", "--store-timeout-ms", "50"],
                         name="local")
    try:
        redis_store.kill()
        c = node.redis()
        for period, offset in (("1d", "-05:00"), ("1h", "+05:30"), ("1mo", None)):
            key = "cal:%s:%s" % (period, offset)
            before = time.time()
            d = cc.as_dict(c.execute_command(*cc.command(key, period, offset, "fixed_window")))
            after = time.time()
            assert d["allowed"] == 1, d
            ends = [cc.window_end(t, period, offset) for t in (before, after)]
            got = d["reset_after_ms"] / 1000.0
            # The reply rounds up to a millisecond; sluiced reads the wall clock once.
            assert min(ends) - after - 0.25 <= got <= max(ends) - before + 0.25, \
                (period, offset, got, ends, before, after)
        assert info_store(node)["decisions_local"] >= 3
        c.close()
    finally:
        node.stop()
