"""MULTI / EXEC / DISCARD in sluiced, as Redis runs them: redis-py's default pipeline()
(MULTI ... EXEC) and pipeline(transaction=False), raw RESP2 and RESP3, replies compared
byte for byte with a real redis-server (Debian's 7.0), the queue's bounds, and EXEC's
atomicity against other connections taking from the same key on the other worker thread."""

import os
import shutil
import subprocess
import tempfile
import threading
import time

import pytest
import redis

from harness import ServerProcess
from respclient import Conn, Error, as_map, encode, pipeline

# docs/commands.md; src/server/server.h
MAX_COMMANDS = 1024
MAX_BYTES = 1 << 20
EXECABORT = "EXECABORT Transaction discarded because of previous errors."


def replies(c, *commands):
    """Sends the commands in one write and reads one reply each (errors as Error)."""
    return pipeline(c, list(commands), timeout=20)


def decision(reply):
    return as_map(reply)


# ---------------------------------------------------------------- redis-py


def test_redis_py_default_pipeline_is_a_transaction(r, key):
    p = r.pipeline()  # transaction=True: MULTI, the commands, EXEC in one write
    for _ in range(3):
        p.execute_command("SL.TAKE", key, 2, 3600)
    p.execute_command("CL.THROTTLE", key + ":cell", 1, 1, 3600)
    got = p.execute()
    assert [decision(d)["allowed"] for d in got[:3]] == [1, 1, 0], got
    assert [decision(d)["remaining"] for d in got[:3]] == [1, 0, 0], got
    assert got[3] == [0, 2, 1, -1, 3600], got

    # A second transaction sees the first's takes consumed.
    p = r.pipeline()
    p.execute_command("SL.TAKE", key, 2, 3600)
    p.execute_command("CL.THROTTLE", key + ":cell", 1, 1, 3600)
    p.execute_command("CL.THROTTLE", key + ":cell", 1, 1, 3600)
    got = p.execute()
    assert decision(got[0])["allowed"] == 0, got
    assert got[1][:3] == [0, 2, 0] and got[2][0] == 1, got


def test_redis_py_pipeline_without_transaction(r, key):
    p = r.pipeline(transaction=False)
    for _ in range(3):
        p.execute_command("SL.TAKE", key, 2, 3600)
    got = p.execute()
    assert [decision(d)["allowed"] for d in got] == [1, 1, 0], got
    assert decision(r.execute_command("SL.PEEK", key, 2, 3600, "COST", 0))["remaining"] == 0


def test_redis_py_refused_command_consumes_nothing(r, key):
    p = r.pipeline()
    p.execute_command("SL.TAKE", key, 5, 3600)
    p.execute_command("SL.TAKE", key)  # wrong number of arguments: refused while queueing
    with pytest.raises(redis.exceptions.ResponseError) as e:
        p.execute()
    assert "EXECABORT" in str(e.value) or "wrong number of arguments" in str(e.value), e.value
    assert decision(r.execute_command("SL.PEEK", key, 5, 3600, "COST", 0))["remaining"] == 5, \
        "an aborted transaction takes nothing"


def test_redis_py_error_inside_exec_is_an_element(r, key):
    p = r.pipeline()
    p.execute_command("SL.TAKE", key, 5, 3600)
    p.execute_command("SL.TAKE", key, 0, 3600)  # right arity, bad limit: fails when run
    p.execute_command("SL.TAKE", key, 5, 3600)
    got = p.execute(raise_on_error=False)
    assert decision(got[0])["remaining"] == 4 and decision(got[2])["remaining"] == 3, got
    assert isinstance(got[1], redis.exceptions.ResponseError), got
    assert str(got[1]).startswith("limit must be"), got[1]


def test_redis_py_watch_is_refused(r, key):
    with r.pipeline() as p:
        with pytest.raises(redis.exceptions.ResponseError) as e:
            p.watch(key)
        assert "WATCH is not supported" in str(e.value)
    assert r.execute_command("UNWATCH") is True  # redis-py's reading of +OK


# ---------------------------------------------------------------- raw RESP


def test_queued_then_exec_answers_an_array(raw, key):
    got = replies(raw, ("MULTI",), ("SL.TAKE", key, 3, 3600), ("PING",), ("ECHO", "x"),
                  ("SL.TAKE", key, 3, 3600), ("EXEC",))
    assert got[:5] == ["OK", "QUEUED", "QUEUED", "QUEUED", "QUEUED"], got
    assert len(got[5]) == 4, got
    assert decision(got[5][0])["remaining"] == 2 and got[5][1] == "PONG"
    assert got[5][2] == b"x" and decision(got[5][3])["remaining"] == 1


def test_empty_transaction(raw):
    assert replies(raw, ("MULTI",), ("EXEC",)) == ["OK", []]


def test_discard_drops_the_queue(raw, key):
    got = replies(raw, ("MULTI",), ("SL.TAKE", key, 3, 3600), ("DISCARD",), ("EXEC",),
                  ("SL.PEEK", key, 3, 3600, "COST", 0))
    assert got[:3] == ["OK", "QUEUED", "OK"], got
    assert isinstance(got[3], Error) and got[3].message == "ERR EXEC without MULTI"
    assert decision(got[4])["remaining"] == 3, "a discarded take consumed nothing"


def test_errors_outside_multi(raw):
    got = replies(raw, ("EXEC",), ("DISCARD",), ("MULTI",), ("MULTI",), ("EXEC",))
    assert [str(e) for e in got[:2]] == ["ERR EXEC without MULTI", "ERR DISCARD without MULTI"]
    assert got[2] == "OK"
    assert isinstance(got[3], Error) and got[3].message == "ERR MULTI calls can not be nested"
    assert got[4] == [], "a nested MULTI does not abort the transaction"


def test_unknown_command_aborts(raw, key):
    got = replies(raw, ("MULTI",), ("SL.TAKE", key, 3, 3600), ("SL.NOPE", "a"), ("PING",),
                  ("EXEC",), ("SL.PEEK", key, 3, 3600, "COST", 0))
    assert got[1] == "QUEUED" and got[3] == "QUEUED", got
    assert str(got[2]) == "ERR unknown command 'SL.NOPE', with args beginning with: 'a' "
    assert isinstance(got[4], Error) and got[4].message == EXECABORT
    assert decision(got[5])["remaining"] == 3
    assert raw.call("PING") == "PONG", "out of MULTI after EXECABORT"


def test_resp3_transaction(server, key):
    with server.conn() as c:
        assert as_map(c.call("HELLO", "3"))["proto"] == 3
        got = replies(c, ("MULTI",), ("SL.TAKE", key, 2, 3600), ("SL.TAKEMANY", 1, key,
                      "LIMIT", 2, 3600), ("SL.PEEK", key, 2, 3600, "COST", 0), ("EXEC",))
        assert got[:4] == ["OK", "QUEUED", "QUEUED", "QUEUED"], got
        assert isinstance(got[4], list) and len(got[4]) == 3
        assert isinstance(got[4][0], dict), "a RESP3 client gets maps inside EXEC's array"
        assert got[4][0][b"remaining"] == 1
        assert got[4][1][b"allowed"] == 1 and got[4][2][b"remaining"] == 0


def test_hello_inside_multi_switches_later_replies(raw, key):
    got = replies(raw, ("MULTI",), ("SL.TAKE", key, 2, 3600), ("HELLO", "3"),
                  ("SL.TAKE", key, 2, 3600), ("EXEC",))
    arr = got[4]
    assert isinstance(arr[0], list), "before HELLO 3 ran: RESP2's flat array"
    assert isinstance(arr[1], dict) and arr[1][b"proto"] == 3
    assert isinstance(arr[2], dict) and arr[2][b"remaining"] == 0, "after it: a map"


def test_connection_commands_are_queued(raw):
    got = replies(raw, ("MULTI",), ("CLIENT", "SETNAME", "in-multi"), ("SELECT", "0"),
                  ("CLIENT", "GETNAME"), ("EXEC",), ("CLIENT", "GETNAME"))
    assert got[1:4] == ["QUEUED"] * 3, got
    assert got[4] == ["OK", "OK", b"in-multi"], got
    assert got[5] == b"in-multi"


def test_quit_inside_multi_runs_at_once(server, key):
    with server.conn() as c:
        c.send(encode("MULTI") + encode("SL.TAKE", key, 2, 3600) + encode("QUIT") +
               encode("EXEC"))
        assert [c.read_reply() for _ in range(3)] == ["OK", "QUEUED", "OK"]
        assert c.wait_closed(5) == b""
    with server.conn() as c:
        assert decision(c.call("SL.PEEK", key, 2, 3600, "COST", 0))["remaining"] == 2


def test_auth_inside_multi(make_server):
    s = make_server(password="pw-multi")
    with s.conn(auth=False) as c:
        assert str(replies(c, ("MULTI",))[0]) == "NOAUTH Authentication required."
    with s.conn() as c:
        got = replies(c, ("MULTI",), ("AUTH", "wrong"), ("AUTH", "pw-multi"), ("EXEC",))
        assert got[1:3] == ["QUEUED", "QUEUED"], got
        assert str(got[3][0]).startswith("WRONGPASS") and got[3][1] == "OK", got


def test_exec_with_arguments_aborts_saying_why(raw):
    got = replies(raw, ("MULTI",), ("PING",), ("EXEC", "now"), ("EXEC",))
    assert str(got[2]) == ("EXECABORT Transaction discarded because of: wrong number of "
                           "arguments for 'exec' command"), got
    assert str(got[3]) == "ERR EXEC without MULTI"


def test_watch(raw):
    got = replies(raw, ("WATCH", "k"), ("UNWATCH",), ("MULTI",), ("WATCH", "k"),
                  ("UNWATCH",), ("EXEC",))
    assert isinstance(got[0], Error) and got[0].message.startswith("ERR WATCH is not supported")
    assert got[1] == "OK"
    assert str(got[3]) == "ERR WATCH inside MULTI is not allowed"
    assert got[4] == "QUEUED" and got[5] == ["OK"]


def test_command_lists_the_transaction_commands(raw):
    names = {e[0].decode().lower() for e in raw.call("COMMAND")}
    assert {"multi", "exec", "discard", "watch", "unwatch"} <= names


# ---------------------------------------------------------------- reads


def test_transaction_in_one_read(server, key):
    with server.conn() as c:
        data = b"".join(encode(*a) for a in [("MULTI",)] + [("SL.TAKE", key, 40, 3600)] * 30 +
                        [("EXEC",), ("SL.PEEK", key, 40, 3600, "COST", 0)])
        c.send(data)
        got = [c.read_reply() for _ in range(33)]
        assert got[:31] == ["OK"] + ["QUEUED"] * 30
        assert [decision(d)["remaining"] for d in got[31]] == list(range(39, 9, -1))
        assert decision(got[32])["remaining"] == 10


def test_transaction_split_across_reads(server, key):
    """Each byte in its own write (TCP_NODELAY): the server reads the commands, MULTI
    and EXEC included, in pieces."""
    with server.conn() as c:
        data = b"".join(encode(*a) for a in [("MULTI",), ("SL.TAKE", key, 4, 3600),
                                             ("SL.TAKE", key, 4, 3600), ("EXEC",)])
        for i in range(len(data)):
            c.send(data[i:i + 1])
            if i % 16 == 0:
                time.sleep(0.001)
        got = [c.read_reply() for _ in range(4)]
        assert got[:3] == ["OK", "QUEUED", "QUEUED"], got
        assert [decision(d)["remaining"] for d in got[3]] == [3, 2]
        # inline commands too (redis-cli's and telnet's form)
        c.send(b"MULTI\r\nSL.TAKE " + key.encode() + b" 4 3600\r\nEXEC\r\n")
        got = [c.read_reply() for _ in range(3)]
        assert got[:2] == ["OK", "QUEUED"] and decision(got[2][0])["remaining"] == 1


# ---------------------------------------------------------------- bounds


def test_queue_is_bounded_in_commands(server, key):
    with server.conn() as c:
        got = replies(c, *([("MULTI",)] + [("SL.TAKE", key, 5, 3600)] * MAX_COMMANDS +
                           [("PING",), ("PING",), ("EXEC",)]))
        assert got[1:MAX_COMMANDS + 1] == ["QUEUED"] * MAX_COMMANDS
        assert str(got[MAX_COMMANDS + 1]) == \
            "ERR MULTI queue is full: at most %d commands per transaction" % MAX_COMMANDS
        assert got[MAX_COMMANDS + 2] == "QUEUED", "as after any refused command"
        assert str(got[-1]) == EXECABORT
        assert decision(c.call("SL.PEEK", key, 5, 3600, "COST", 0))["remaining"] == 5
        assert replies(c, ("MULTI",), ("PING",), ("EXEC",)) == ["OK", "QUEUED", ["PONG"]]


def test_queue_is_bounded_in_bytes(server):
    big = b"b" * 60000  # under the 64 KiB request cap; 18 of them pass 1 MiB
    n = MAX_BYTES // len(big) + 1
    with server.conn() as c:
        got = replies(c, *([("MULTI",)] + [("ECHO", big)] * n + [("EXEC",)]))
        assert got[1:n] == ["QUEUED"] * (n - 1)
        assert str(got[n]) == "ERR MULTI queue is full: at most %d bytes per transaction" % MAX_BYTES
        assert str(got[n + 1]) == EXECABORT
        assert c.call("PING") == "PONG"
    server.assert_serving()


def test_connection_closed_in_multi(server, key):
    # The queue is freed with the connection (the harness's ASan build reports a leak at
    # stop otherwise), and nothing queued runs.
    with server.conn() as c:
        assert replies(c, ("MULTI",), ("SL.TAKE", key, 5, 3600)) == ["OK", "QUEUED"]
    with server.conn() as c:
        assert decision(c.call("SL.PEEK", key, 5, 3600, "COST", 0))["remaining"] == 5


# ---------------------------------------------------------------- atomicity


def test_exec_is_atomic_against_other_threads(server, key):
    """One connection runs transactions of TAKES takes on a key while others take from it
    on both worker threads. The key is a fixed window of a day, so that nothing refills:
    inside one EXEC's reply, remaining falls by exactly one from take to take unless
    another connection's take ran between two of them."""
    TAKES, ROUNDS, HAMMERS, limit = 100, 100, 4, 10 ** 9
    take = ("SL.TAKE", key, limit, "1d", "ALGORITHM", "fixed_window")
    stop = threading.Event()
    running = threading.Semaphore(0)
    errors = []

    def hammer():
        try:
            with server.conn(timeout=30) as h:
                first = True
                while not stop.is_set():
                    for d in pipeline(h, [take] * 50, timeout=30):
                        assert decision(d)["allowed"] == 1
                    if first:
                        running.release()
                        first = False
        except BaseException as e:
            errors.append(e)
            running.release()

    threads = [threading.Thread(target=hammer) for _ in range(HAMMERS)]
    for t in threads:
        t.start()
    try:
        for _ in threads:  # every hammer has had its first pipeline answered
            assert running.acquire(timeout=30)
        with server.conn(timeout=30) as c:
            for _ in range(ROUNDS):
                got = replies(c, ("MULTI",), *([take] * TAKES), ("EXEC",))
                left = [decision(d)["remaining"] for d in got[-1]]
                assert len(left) == TAKES
                gaps = [a - b for a, b in zip(left, left[1:])]
                assert gaps == [1] * (TAKES - 1), "another take ran inside EXEC: %r" % gaps
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    with server.conn() as c:
        assert c.call("INFO", "clients")  # the server still serves


# ---------------------------------------------------------------- against Redis


class RedisServer(ServerProcess):
    """A plain redis-server (no module), to compare error texts with."""

    name = "redis-server"

    def __init__(self, workdir):
        super().__init__()
        self.workdir = workdir

    def argv(self):
        return ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                self.workdir, "--save", "", "--appendonly", "no", "--daemonize", "no",
                "--logfile", os.path.join(self.workdir, "redis.log")]

    def spawn(self):
        return subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                cwd=self.workdir)

    def ping(self):
        with Conn("127.0.0.1", self.port, timeout=2.0) as c:
            return c.call("PING") == "PONG"

    def output(self):
        try:
            with open(os.path.join(self.workdir, "redis.log")) as f:
                return f.read()[-5000:]
        except OSError:
            return ""


@pytest.fixture(scope="module")
def real_redis():
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    workdir = tempfile.mkdtemp(prefix="sluice-multi-redis-")
    s = RedisServer(workdir).start()
    yield s
    s.terminate()
    shutil.rmtree(workdir, ignore_errors=True)


# Sequences of commands both servers know; each must be answered byte for byte alike.
SAME_AS_REDIS = [
    [("EXEC",), ("DISCARD",), ("EXEC", "x"), ("MULTI", "x")],
    [("MULTI",), ("MULTI",), ("PING",), ("EXEC",)],
    [("MULTI",), ("NOSUCHCMD", "a", "b"), ("PING",), ("EXEC",), ("PING",)],
    [("MULTI",), ("PING", "a", "b"), ("ECHO", "x"), ("EXEC",)],
    [("MULTI",), ("ECHO",), ("EXEC",)],
    [("MULTI",), ("PING",), ("ECHO", "e"), ("SELECT", "0"), ("SELECT", "99"), ("EXEC",)],
    [("MULTI",), ("EXEC", "x"), ("EXEC",)],
    [("MULTI",), ("DISCARD", "x"), ("DISCARD",), ("PING",)],
    [("MULTI",), ("ECHO", "q"), ("DISCARD",), ("EXEC",)],
    [("MULTI",), ("WATCH", "k"), ("UNWATCH",), ("EXEC",)],
    [("MULTI",), ("WATCH",), ("EXEC",)],
    [("UNWATCH",), ("MULTI",), ("EXEC",), ("EXEC",)],
    [("MULTI",), ("AUTH", "x"), ("CLIENT", "SETNAME", "n"), ("CLIENT", "GETNAME"), ("EXEC",)],
    [("HELLO", "3"), ("MULTI",), ("PING",), ("ECHO", "r3"), ("EXEC",)],
    [("MULTI",), ("PING",), ("QUIT",)],
]


def raw_exchange(port, commands):
    with Conn("127.0.0.1", port, timeout=10) as c:
        c.send(b"".join(encode(*a) for a in commands))
        if commands[-1] == ("QUIT",):
            return c.wait_closed(10)
        want = len(commands)
        out = []
        for _ in range(want):
            out.append(c.read_reply())
        return repr(out)


@pytest.mark.parametrize("commands", SAME_AS_REDIS, ids=lambda cs: " ".join(a[0] for a in cs))
def test_replies_match_redis(server, real_redis, commands):
    if commands[0] == ("HELLO", "3"):
        # HELLO's own map differs (server name, version, id): compare what follows it.
        got = [raw_exchange(s.port, commands) for s in (server, real_redis)]
        tail = [g[g.index("b'modules': []}") :] for g in got]
        assert tail[0] == tail[1]
        return
    assert raw_exchange(server.port, commands) == raw_exchange(real_redis.port, commands)
