"""The redis backend (src/backend/redis.c) against real redis-server 7: decisions made
in Redis by the module's SL.DECIDE or by the Lua script's EVALSHA, pipelining, and
what each store-down policy does when Redis is killed, restarted, slow, or not Redis.

No timing assertions: a test waits for answers, never for a clock.
"""

import subprocess
import threading

import pytest
import redis

from redis_harness import (garbage_server, make_redis, make_redis_driver,  # noqa: F401 fixtures
                           redis_driver_path)
from harness import free_port  # noqa: E402 (redis_harness puts tests/lib on the path)

GCRA3 = "gcra 3 60000 0 1"  # 3 a minute: no refill within a test


def url(server, db=None, query=""):
    return "redis://127.0.0.1:%d%s%s" % (server.port, "" if db is None else "/%d" % db, query)


def decisions(answers):
    return [(a["by"], a["d"][0]["allowed"], a["d"][0]["remaining"]) for a in answers]


def wait_state(drv, state, tries=400):
    """Asks for stats until the backend's state is `state` (each ask 25 ms apart)."""
    for _ in range(tries):
        st = drv.stats()
        if st["stats"]["state"] == state:
            return st
        drv.send("sleep 25")
    pytest.fail("the backend never became %s: %s" % (state, st))


def wait_error(drv, words, tries=400):
    """Asks for stats until the worker's last error has `words`. Why a connection
    failed comes back with the first command that meets the failure (a take, or the
    breaker's probe, queued on a connection being made), so it may take a few."""
    for _ in range(tries):
        st = drv.stats()
        if words in st["last_error"]:
            return st
        drv.send("sleep 25")
    pytest.fail("the last error never said %r: %s" % (words, st))


# ---- decisions in Redis ----

def test_module_decides_every_op(make_redis, make_redis_driver):
    r = make_redis()
    drv = make_redis_driver(url(r))
    got = drv.run(*["take a " + GCRA3] * 4)
    assert decisions(got) == [("store", True, 2), ("store", True, 1), ("store", True, 0),
                              ("store", False, 0)]
    assert got[3]["failed"] == 0 and got[3]["d"][0]["retry_after_ns"] > 0
    st = drv.stats()["stats"]
    assert st["module"] is True
    # Each round trip is in the histogram once.
    assert st["requests"] == 4 and sum(st["rtt"]) == 4 and st["errors"] == 0

    # All or nothing: b has room, c has none, so b is not consumed.
    got = drv.run("take c gcra 1 60000 0 1",
                  "takemany 2 b gcra 5 60000 0 1 c gcra 1 60000 0 1",
                  "peek b gcra 5 60000 0 1")
    assert got[1]["failed"] == 1
    assert [d["allowed"] for d in got[1]["d"]] == [True, False]
    assert got[2]["d"][0]["remaining"] == 4  # a peek of cost 1 on an untouched key

    # CL.THROTTLE's limit: limit = max_burst + 1, as redis-cell answers.
    got = drv.run("cell k 2 10 60 1")
    assert got[0]["d"][0]["limit"] == 3 and got[0]["d"][0]["remaining"] == 2

    # A lease: granted with the id sent, refused when full, released once.
    got = drv.run("acquire l 1 60000 1 00000000000000ab",
                  "acquire l 1 60000 1 00000000000000cd",
                  "release l 1 60000 00000000000000ab",
                  "release l 1 60000 00000000000000ab")
    assert got[0]["d"][0]["allowed"] and got[0]["d"][0]["lease"] == "00000000000000ab"
    assert not got[1]["d"][0]["allowed"] and got[1]["failed"] == 0
    assert (got[2]["count"], got[3]["count"]) == (1, 0)

    got = drv.run("reset a b c nothing-here")  # b was never consumed
    assert got[0]["rc"] == 0 and got[0]["count"] == 2
    assert drv.run("take a " + GCRA3)[0]["d"][0]["remaining"] == 2


def test_state_lives_in_redis(make_redis, make_redis_driver):
    """Two drivers (two sluiced) share one limit: what one took, the other sees."""
    r = make_redis()
    one, two = make_redis_driver(url(r)), make_redis_driver(url(r))
    assert decisions(one.run("take shared " + GCRA3, "take shared " + GCRA3)) == [
        ("store", True, 2), ("store", True, 1)]
    assert decisions(two.run("take shared " + GCRA3, "take shared " + GCRA3)) == [
        ("store", True, 0), ("store", False, 0)]
    assert r.client().exists("shared") == 1


def test_wrongtype_and_errors_are_answers(make_redis, make_redis_driver):
    r = make_redis()
    c = r.client()
    c.set("plain", "a string")
    drv = make_redis_driver(url(r))
    got = drv.run("take plain " + GCRA3)
    assert got[0]["rc"] == -15 and got[0]["by"] == "store"  # SL_ERR_WRONGTYPE
    assert got[0]["errstr"].startswith("WRONGTYPE")  # Redis's own words, for the log
    assert "WRONGTYPE" in drv.stats()["last_error"]
    # The store answered: no failure counted toward the breaker, the next take is Redis's.
    assert decisions(drv.run("take fine " + GCRA3)) == [("store", True, 2)]


def with_password(r, password="s3cret"):
    # Set once started: the harness's readiness PING has no password.
    r.client().config_set("requirepass", password)
    return r


def test_database_and_password(make_redis, make_redis_driver):
    r = with_password(make_redis())
    drv = make_redis_driver(url(r, db=3, query="?password=s3cret"))
    assert decisions(drv.run("take indb3 " + GCRA3)) == [("store", True, 2)]
    c3 = r.client(password="s3cret", db=3)
    c0 = r.client(password="s3cret", db=0)
    assert c3.exists("indb3") == 1 and c0.exists("indb3") == 0

    # user:password@ in the URL (Redis's default user).
    drv = make_redis_driver("redis://default:s3cret@127.0.0.1:%d/3" % r.port)
    assert decisions(drv.run("take indb3 " + GCRA3)) == [("store", True, 1)]


def test_wrong_password_is_a_store_failure(make_redis, make_redis_driver):
    r = with_password(make_redis())
    drv = make_redis_driver(url(r, query="?password=wrong"), "--on-error", "fail_closed")
    got = drv.run(*["take k " + GCRA3] * 6)
    assert all(a["by"] == "fail_closed" and not a["d"][0]["allowed"] for a in got)
    st = wait_error(drv, "AUTH refused")
    assert "invalid username-password pair" in st["last_error"], st


# ---- the script path ----

def test_script_path_without_module(make_redis, make_redis_driver):
    r = make_redis(module=False)
    drv = make_redis_driver(url(r))
    got = drv.run(*["take a " + GCRA3] * 4)
    assert decisions(got) == [("store", True, 2), ("store", True, 1), ("store", True, 0),
                              ("store", False, 0)]
    st = drv.stats()["stats"]
    assert st["module"] is False and st["requests"] == 4

    # A flushed script cache answers NOSCRIPT: loaded again, resent, same state.
    r.client().script_flush()
    got = drv.run("take a " + GCRA3, "take b " + GCRA3)
    assert decisions(got) == [("store", False, 0), ("store", True, 2)]


# ---- pipelining ----

def reads_processed(c):
    return c.info("stats")["total_reads_processed"]


def test_requests_together_leave_in_one_write(make_redis, make_redis_driver):
    r = make_redis()
    c = r.client()
    drv = make_redis_driver(url(r))
    drv.run("take warm " + GCRA3)  # connected, the server's kind known
    before = reads_processed(c)
    n = 100
    got = drv.run(*["take p gcra 1000 60000 0 1"] * n)
    after = reads_processed(c)
    assert [a["id"] for a in got] == list(range(2, 2 + n))
    # In submit order on one connection: remaining counts down.
    assert [a["d"][0]["remaining"] for a in got] == list(range(999, 999 - n, -1))
    # One write of 100 commands takes Redis a few reads (a socket buffer's worth
    # each), not 100; the INFO calls add one read each.
    assert after - before < 20, (before, after)
    print("reads for %d commands: %d" % (n, after - before))


# ---- store-down policies ----

def kill(server):
    server.kill()


@pytest.mark.parametrize("policy", ["fail_open", "fail_closed", "local"])
def test_redis_killed_each_policy(make_redis, make_redis_driver, policy):
    r = make_redis()
    drv = make_redis_driver(url(r), "--on-error", policy, "--fleet-nodes", "2",
                      "--timeout-ms", "200")
    assert decisions(drv.run("take k gcra 10 60000 0 1")) == [("store", True, 9)]
    kill(r)
    got = drv.run(*["take k gcra 10 60000 0 1"] * 8)
    assert len(got) == 8
    assert {a["by"] for a in got} == {policy}
    if policy == "fail_open":
        assert all(a["d"][0]["allowed"] and a["d"][0]["remaining"] == 10 for a in got)
    elif policy == "fail_closed":
        assert all(not a["d"][0]["allowed"] and a["d"][0]["retry_after_ns"] > 0 for a in got)
    else:
        # This node's share of the fleet's limit: 10 / 2 = 5, then refused.
        assert [a["d"][0]["allowed"] for a in got] == [True] * 5 + [False] * 3
        assert got[0]["d"][0]["limit"] == 5
    st = drv.stats()["stats"]
    assert st["state"] in ("down", "breaker_open")
    assert st["breaker_opens"] == 1 and st["errors"] >= 5
    # A per-request policy wins over the default.
    other = "fail_closed" if policy != "fail_closed" else "fail_open"
    got = drv.run("take k gcra 10 60000 0 1 on_error=" + other)
    assert got[0]["by"] == other


def test_redis_restarted_back_to_the_store(make_redis, make_redis_driver):
    r = make_redis()
    drv = make_redis_driver(url(r), "--on-error", "fail_closed")
    assert decisions(drv.run("take k " + GCRA3)) == [("store", True, 2)]
    kill(r)
    got = drv.run(*["take k " + GCRA3] * 6)
    assert {a["by"] for a in got} == {"fail_closed"}
    r.start(port=r.port)
    st = wait_state(drv, "up")
    assert st["stats"]["connects"] >= 2 and st["stats"]["disconnects"] >= 1, st
    # The breaker closed with a probe; a fresh Redis holds no state for k.
    got = drv.run("take k " + GCRA3)
    assert decisions(got) == [("store", True, 2)]


@pytest.mark.parametrize("how", ["debug_sleep", "client_pause"])
def test_slow_redis_timeouts_answered_by_policy(make_redis, make_redis_driver, how):
    r = make_redis(args=["--enable-debug-command", "yes"])
    drv = make_redis_driver(url(r), "--on-error", "fail_open", "--timeout-ms", "50")
    assert decisions(drv.run("take k " + GCRA3)) == [("store", True, 2)]
    other = r.client()
    if how == "client_pause":
        # Returns at once; every client's next command waits 500 ms.
        other.execute_command("CLIENT", "PAUSE", "500")
        sleeper = None
    else:
        # DEBUG SLEEP holds the whole server; it has begun once a PING from a third
        # connection goes unanswered for a while (only then is the test's premise
        # true: the driver's takes will find Redis busy).
        sleeper = threading.Thread(target=lambda: other.execute_command("DEBUG", "SLEEP", "0.5"))
        sleeper.start()
        probe = r.client(socket_timeout=0.1)
        for _ in range(100):
            try:
                probe.ping()
            except redis.exceptions.TimeoutError:
                break
        else:
            pytest.fail("DEBUG SLEEP never held the server")
    got = drv.run("take k " + GCRA3, "take k " + GCRA3)
    if sleeper:
        sleeper.join()
    assert {a["by"] for a in got} == {"fail_open"}
    # The late replies come back and are dropped: no request is answered twice, and
    # the store's answer to the next take shows the late takes did happen in Redis.
    drv.send("sleep 600")
    got = drv.run("take k " + GCRA3)
    assert got[0]["id"] == 4 and got[0]["by"] == "store"
    assert got[0]["d"][0]["allowed"] is False
    st = drv.stats()["stats"]
    assert st["timeouts"] == 2
    rest = drv.close()
    assert rest == []  # nothing more was printed: no double answer


def test_not_redis_is_a_clear_error(garbage_server, make_redis_driver):
    drv = make_redis_driver("redis://127.0.0.1:%d" % garbage_server, "--on-error", "fail_closed")
    got = drv.run(*["take k " + GCRA3] * 6)
    assert {a["by"] for a in got} == {"fail_closed"}
    # hiredis's words for a reply that is not RESP: the 'H' of "HTTP/1.1".
    wait_error(drv, "Protocol error")


def test_nothing_listening(make_redis_driver):
    drv = make_redis_driver("redis://127.0.0.1:%d" % free_port(), "--on-error", "local")
    got = drv.run(*["take k gcra 2 60000 0 1"] * 3)
    assert [(a["by"], a["d"][0]["allowed"]) for a in got] == [
        ("local", True), ("local", True), ("local", False)]
    assert drv.stats()["stats"]["state"] in ("down", "breaker_open")


@pytest.mark.parametrize("store,words", [
    ("redis://127.0.0.1", "has no port"),
    ("redis://127.0.0.1:99999", "port '99999' is not a number between 1 and 65535"),
    ("http://127.0.0.1:6379", "scheme is redis:// or redis-cluster://"),
    ("redis://127.0.0.1:6379/x", "database 'x' is not a number"),
    ("redis://someone@127.0.0.1:6379", "the user has no password"),
    ("redis://127.0.0.1:6379?pasword=x", "unknown parameter 'pasword'"),
    ("redis://a:1,b:2", "redis:// takes one host:port"),
])
def test_bad_urls_refused(store, words):
    p = subprocess.run([redis_driver_path(), "--store", store], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=30)
    assert p.returncode == 2
    assert words in p.stderr.decode(), p.stderr


def test_silent_connection_dropped_and_made_again(make_redis, make_redis_driver):
    """A connection that answers nothing for 10 budgets (at least 1 s) is dropped."""
    r = make_redis()
    drv = make_redis_driver(url(r), "--on-error", "fail_open", "--timeout-ms", "50")
    assert decisions(drv.run("take k " + GCRA3)) == [("store", True, 2)]
    r.client().execute_command("CLIENT", "PAUSE", "2500")
    got = drv.run("take k " + GCRA3)
    assert got[0]["by"] == "fail_open"
    drv.send("sleep 1300")
    st = drv.stats()
    assert "no reply for too long" in st["last_error"], st
    assert st["stats"]["disconnects"] >= 1
    r.client().ping()  # returns once the pause is over
    wait_state(drv, "up")
    assert drv.run("take k " + GCRA3)[0]["by"] == "store"


def test_detach_answers_requests_in_flight(make_redis, make_redis_driver):
    r = make_redis()
    drv = make_redis_driver(url(r), "--on-error", "fail_closed")
    assert decisions(drv.run("take k " + GCRA3)) == [("store", True, 2)]
    r.client().execute_command("CLIENT", "PAUSE", "1000")
    drv.send("take k %s timeout=5000" % GCRA3, "take j %s timeout=5000" % GCRA3, "quit")
    got = sorted(drv.close(), key=lambda a: a.get("id", 0))
    assert [(a["id"], a["by"]) for a in got] == [(2, "fail_closed"), (3, "fail_closed")], got


# ---- the same decisions as the memory store ----

TRACE = [
    "take g gcra 5 86400000 3 1",
    "take g gcra 5 86400000 3 2",
    "take g gcra 5 86400000 3 1",
    "peek g gcra 5 86400000 3 1",
    "take t token_bucket 4 86400000 0 3",
    "take t token_bucket 4 86400000 0 2",
    "take q leaky_bucket 2 86400000 4 1",
    "take q leaky_bucket 2 86400000 4 1",
    "take f fixed_window 3 86400000 0 2",
    "take f fixed_window 3 86400000 0 2",
    "take s sliding_log 3 86400000 0 1",
    "take s sliding_log 3 86400000 0 3",
    "take w sliding_window 6 86400000 0 4",
    "take w sliding_window 6 86400000 0 4",
    "takemany 3 m1 gcra 10 86400000 0 1 m2 token_bucket 2 86400000 0 2 m3 fixed_window 9 86400000 0 1",
    "takemany 2 m1 gcra 10 86400000 0 1 m2 token_bucket 2 86400000 0 1",
    "peek m1 gcra 10 86400000 0 1",
    "cell c 3 10 60 2",
    "cell c 3 10 60 3",
    "take p gcra 4 86400000 0 1 carry",
    "take p gcra 8 86400000 0 1 carry",
    "acquire l 2 60000 1 0000000000000001",
    "acquire l 2 60000 1 0000000000000002",
    "acquire l 2 60000 1 0000000000000003",
    "release l 2 60000 0000000000000001",
    "acquire l 2 60000 1 0000000000000004",
]


def comparable(a):
    """What two stores must agree on: not the durations, which move with the clock."""
    return (a["op"], a["rc"], a["failed"], a["count"] if a["op"] == "release" else None,
            [(d["allowed"], d["limit"], d["remaining"], d["lease"]) for d in a.get("d", [])])


def memory_backend_built():
    p = subprocess.run([redis_driver_path(), "--store", "memory://"], input=b"",
                       capture_output=True, timeout=30)
    return p.returncode == 0


@pytest.mark.parametrize("reference", ["local", "memory"])
def test_same_decisions_as_the_memory_store(make_redis, make_redis_driver, reference):
    """The module's decisions for a trace of every algorithm and op are the memory
    store's: the memory backend's (src/backend/memory.c), and the local limiter's
    (an sl_store with the whole limit, fleet_nodes 1), which decides when nothing
    listens at the store's address."""
    r = make_redis()
    remote = [comparable(a) for a in make_redis_driver(url(r)).run(*TRACE)]
    if reference == "memory":
        if not memory_backend_built():
            pytest.skip("the memory backend (src/backend/memory.c) is not built in")
        ref = make_redis_driver("memory://").run(*TRACE)
        assert {a["by"] for a in ref} == {"store"}
    else:
        ref = make_redis_driver("redis://127.0.0.1:%d" % free_port(), "--on-error", "local").run(*TRACE)
        assert {a["by"] for a in ref} == {"local"}
    assert remote == [comparable(a) for a in ref]


def test_answers_complete_out_of_order(make_redis, make_redis_driver):
    """A request whose budget runs out is answered before an earlier one still
    waiting for Redis, which is answered by Redis later."""
    r = make_redis()
    drv = make_redis_driver(url(r), "--on-error", "fail_closed")
    assert decisions(drv.run("take k " + GCRA3)) == [("store", True, 2)]
    r.client().execute_command("CLIENT", "PAUSE", "700")
    drv.send("take k %s timeout=10000" % GCRA3, "take k %s timeout=50" % GCRA3)
    first, second = drv.answer(), drv.answer()
    assert (first["id"], first["by"]) == (3, "fail_closed")
    assert (second["id"], second["by"]) == (2, "store")
    assert second["d"][0]["remaining"] == 1


def test_host_name_resolved_without_blocking(make_redis, make_redis_driver):
    r = make_redis()
    drv = make_redis_driver("redis://localhost:%d" % r.port)
    got = drv.run("take n " + GCRA3)
    # localhost may name ::1 first, where this Redis does not listen: the next
    # connection takes the next address.
    for _ in range(400):
        if got[0]["by"] == "store":
            break
        drv.send("sleep 25")
        got = drv.run("take n " + GCRA3)
    assert got[0]["by"] == "store"


def test_unknown_host_name_is_a_clear_error(make_redis_driver):
    drv = make_redis_driver("redis://no-such-host.invalid:6379", "--on-error", "fail_closed")
    got = drv.run(*["take k " + GCRA3] * 6)
    assert {a["by"] for a in got} == {"fail_closed"}
    wait_error(drv, "cannot resolve no-such-host.invalid")


def test_a_store_that_cannot_serve_is_a_failure_not_an_answer(make_redis, make_redis_driver):
    """Redis at its maxmemory refuses writes with OOM: the store-down policy answers
    (an ERR about the request's arguments would be the request's answer)."""
    r = make_redis()
    c = r.client()
    drv = make_redis_driver(url(r), "--on-error", "fail_closed")
    assert decisions(drv.run("take k " + GCRA3)) == [("store", True, 2)]
    c.config_set("maxmemory", "1")
    got = drv.run("take k " + GCRA3)
    assert got[0]["by"] == "fail_closed" and got[0]["rc"] == 0
    assert drv.stats()["last_error"].startswith("OOM")
    c.config_set("maxmemory", "0")
    assert decisions(drv.run("take k " + GCRA3)) == [("store", True, 1)]


def test_local_share_of_every_kind_of_limit(make_redis_driver):
    """The local limiter enforces limit / N of CL.THROTTLE's limits and of leases too."""
    drv = make_redis_driver("redis://127.0.0.1:%d" % free_port(), "--on-error", "local",
                      "--fleet-nodes", "2")
    # cell: max_burst 5 (a burst of 6), 10 per minute: the node's share is a burst of 3.
    got = drv.run(*["cell c 5 10 60 1"] * 4)
    assert [a["d"][0]["allowed"] for a in got] == [True, True, True, False]
    assert got[0]["d"][0]["limit"] == 3
    # 4 leases in flight across the fleet: 2 on this node.
    got = drv.run("acquire l 4 60000 1 0000000000000001", "acquire l 4 60000 1 0000000000000002",
                  "acquire l 4 60000 1 0000000000000003", "release l 4 60000 0000000000000001",
                  "acquire l 4 60000 1 0000000000000004")
    assert [a["d"][0]["allowed"] for a in got if a["op"] == "acquire"] == [True, True, False, True]
    assert got[3]["count"] == 1
    # RESET needs the store: unavailable, and the node forgets its own state.
    got = drv.run("reset c", "cell c 5 10 60 1")
    assert got[0]["rc"] == -16 and got[1]["d"][0]["allowed"]


def test_database_out_of_range_is_a_clear_error(make_redis, make_redis_driver):
    r = make_redis()
    drv = make_redis_driver(url(r, db=999), "--on-error", "fail_open")
    got = drv.run(*["take k " + GCRA3] * 6)
    assert {a["by"] for a in got} == {"fail_open"}
    st = wait_error(drv, "SELECT refused")
    assert "DB index is out of range" in st["last_error"], st
    assert r.client().dbsize() == 0


def test_reset_of_more_keys_than_one_command_takes(make_redis, make_redis_driver):
    r = make_redis()
    drv = make_redis_driver(url(r))
    keys = ["r%d" % i for i in range(20)]
    drv.run(*["take %s %s" % (k, GCRA3) for k in keys])
    got = drv.run("reset " + " ".join(keys + ["never-taken"]))
    assert got[0]["rc"] == 0 and got[0]["count"] == 20 and got[0]["by"] == "store"
    assert r.client().dbsize() == 0


def test_script_decides_as_the_module(make_redis, make_redis_driver):
    """The Lua script (a Redis without the module) answers the trace as SL.DECIDE does."""
    with_module = make_redis("module")
    without = make_redis("script", module=False)
    a = make_redis_driver(url(with_module)).run(*TRACE)
    b = make_redis_driver(url(without)).run(*TRACE)
    assert {x["by"] for x in a + b} == {"store"}
    assert [comparable(x) for x in a] == [comparable(x) for x in b]


def test_a_long_budget_is_not_cut_by_the_watchdog(make_redis, make_redis_driver):
    """A policy that waits 3 s for Redis gets its answer from a Redis paused for 1.5 s:
    the silent-connection watchdog (1 s at the default budget) waits for it too."""
    r = make_redis()
    drv = make_redis_driver(url(r), "--on-error", "fail_open", "--timeout-ms", "50")
    assert decisions(drv.run("take k " + GCRA3)) == [("store", True, 2)]
    r.client().execute_command("CLIENT", "PAUSE", "1500")
    got = drv.run("take k %s timeout=3000" % GCRA3)
    assert decisions(got) == [("store", True, 1)]
    assert drv.stats()["stats"]["disconnects"] == 0
