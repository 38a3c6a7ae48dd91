"""The commands real clients send on connect, error shapes, inline commands, requirepass."""

import socket
import time

import pytest
import redis

from respclient import Conn, Error, Simple, Verbatim, as_map, pipeline
from conftest import free_port

HELLO_FIELDS = {"server", "version", "proto", "id", "mode", "role", "modules"}


def error_of(c, *args):
    c.send_command(*args)
    e = c.read_reply()
    assert isinstance(e, Error), "expected an error for %r, got %r" % (args, e)
    return e.message


def test_ping(raw):
    r = raw.call("PING")
    assert isinstance(r, Simple) and r == "PONG"
    assert raw.call("PING", "hello") == b"hello"
    assert error_of(raw, "PING", "a", "b") == "ERR wrong number of arguments for 'ping' command"


def test_echo_binary_safe(raw):
    for msg in (b"x", b"", b"\x00\r\n\xff" * 100, b"a" * 60000):
        assert raw.call("ECHO", msg) == msg
    assert error_of(raw, "ECHO") == "ERR wrong number of arguments for 'echo' command"


def test_hello(raw):
    m = raw.call("HELLO")  # no version: answers in the current protocol, RESP2
    assert isinstance(m, list)
    m = as_map(m)
    assert HELLO_FIELDS <= set(m), m
    assert m["proto"] == 2
    m3 = raw.call("HELLO", "3")
    assert isinstance(m3, dict), "HELLO 3 answers a RESP3 map: %r" % (m3,)
    m3 = as_map(m3)
    assert HELLO_FIELDS <= set(m3)
    assert m3["proto"] == 3 and m3["server"] and isinstance(m3["id"], int)
    assert m3["id"] == m["id"] == raw.call("CLIENT", "ID")
    assert isinstance(m3["modules"], list)
    assert raw.call("PING") == "PONG"
    m2 = raw.call("HELLO", "2")
    assert isinstance(m2, list) and as_map(m2)["proto"] == 2


def test_hello_bad_version_keeps_protocol(raw):
    assert isinstance(error_of(raw, "HELLO", "4"), str)
    assert isinstance(error_of(raw, "HELLO", "x"), str)
    assert isinstance(raw.call("HELLO"), list), "still RESP2 after a refused HELLO"


def test_hello_setname(raw):
    m = as_map(raw.call("HELLO", "3", "SETNAME", "worker-7"))
    assert m["proto"] == 3
    assert raw.call("CLIENT", "GETNAME") == b"worker-7"


NO_PASSWORD = ("ERR AUTH <password> called without any password configured for the default user. "
               "Are you sure your configuration is correct?")


def test_auth_without_requirepass(raw):
    """As Redis 7 answers with no password set (its default user takes any password):
    a client configured with credentials (Lettuce, redis-py 5 with protocol=3 send
    HELLO 3 AUTH default <password> on connect) must still get in."""
    m = raw.call("HELLO", "3", "AUTH", "default", "whatever")
    assert isinstance(m, dict) and as_map(m)["proto"] == 3, m
    assert raw.call("AUTH", "default", "anything") == "OK"
    assert error_of(raw, "AUTH", "x") == NO_PASSWORD
    assert raw.call("PING") == "PONG"


def test_client_commands(raw):
    assert raw.call("CLIENT", "GETNAME") is None
    assert raw.call("CLIENT", "SETNAME", "app-1") == "OK"
    assert raw.call("CLIENT", "GETNAME") == b"app-1"
    assert raw.call("CLIENT", "SETINFO", "lib-name", "redis-py") == "OK"
    assert raw.call("CLIENT", "SETINFO", "lib-ver", "4.3.4") == "OK"
    i = raw.call("CLIENT", "ID")
    assert isinstance(i, int) and i > 0
    with Conn(*raw.sock.getpeername()) as other:
        assert other.call("CLIENT", "ID") != i


def test_client_ids_differ_and_names_are_per_connection(server):
    with server.conn() as a, server.conn() as b:
        assert a.call("CLIENT", "SETNAME", "a") == "OK"
        assert b.call("CLIENT", "GETNAME") is None


def test_select(raw):
    assert raw.call("SELECT", "0") == "OK"
    assert error_of(raw, "SELECT", "1").startswith("ERR ")
    assert error_of(raw, "SELECT", "x").startswith("ERR ")
    assert raw.call("PING") == "PONG"


def test_command(raw):
    n = raw.call("COMMAND", "COUNT")
    assert isinstance(n, int) and n >= 15
    table = raw.call("COMMAND")
    assert isinstance(table, list) and len(table) == n
    names = {}
    for entry in table:
        assert isinstance(entry, list) and len(entry) >= 6, entry
        assert isinstance(entry[1], int), entry  # arity
        names[entry[0].decode().lower() if isinstance(entry[0], bytes) else str(entry[0]).lower()] = entry
    for cmd in ("ping", "echo", "hello", "auth", "client", "select", "command", "info", "quit",
                "cl.throttle", "sl.take", "sl.peek", "sl.policy", "sl.takemany", "sl.reset",
                "sl.acquire", "sl.release"):
        assert cmd in names, "COMMAND lacks %s" % cmd
    # redis convention: -N is "at least N" (the name counts); CL.THROTTLE takes 4 or 5 arguments
    assert names["cl.throttle"][1] in (-5, 5, 6), names["cl.throttle"]
    assert names["ping"][1] == -1


def test_command_docs(raw):
    docs = raw.call("COMMAND", "DOCS")
    assert isinstance(docs, list) and len(docs) % 2 == 0 and docs, docs  # RESP2: flat map
    m = as_map(docs)
    assert "cl.throttle" in {k.lower() for k in m}
    raw.call("HELLO", "3")
    docs3 = raw.call("COMMAND", "DOCS", "sl.take")
    assert isinstance(docs3, dict) and len(docs3) == 1, docs3


def info_sections(text):
    sections, cur = {}, None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("#"):
            cur = line.lstrip("# ").lower()
            sections[cur] = {}
        elif line and cur is not None:
            assert ":" in line, "INFO lines are field:value, got %r" % line
            k, v = line.split(":", 1)
            sections[cur][k] = v
    return sections


def test_info(raw, key):
    text = raw.call("INFO")
    assert isinstance(text, bytes)
    s = info_sections(text.decode())
    for name in ("server", "clients", "stats", "memory"):
        assert name in s, "INFO lacks a # %s section: %r" % (name, list(s))
    only = info_sections(raw.call("INFO", "memory").decode())
    assert "memory" in only and "server" not in only


def int_fields(section, word):
    return {k: int(v) for k, v in section.items() if word in k and v.strip().lstrip("-").isdigit()}


def test_info_counts_keys_and_rejections(raw, key):
    before = info_sections(raw.call("INFO").decode())
    # docs/commands.md puts the key count in the memory section; Redis in keyspace
    keys0 = int_fields(dict(before.get("keyspace", {}), **before["memory"]), "key")
    rej0 = int_fields(before["stats"], "reject")
    assert keys0, "INFO memory has no key count: %r" % before["memory"]
    assert rej0, "INFO stats has no rejection count: %r" % before["stats"]
    for i in range(5):
        raw.call("SL.TAKE", "%s:%d" % (key, i), 1, 3600)
    raw.call("SL.TAKE", "%s:0" % key, 1, 3600)  # rejected
    after = info_sections(raw.call("INFO").decode())
    keys1 = int_fields(dict(after.get("keyspace", {}), **after["memory"]), "key")
    rej1 = int_fields(after["stats"], "reject")
    assert any(keys1.get(k, 0) >= v + 5 for k, v in keys0.items()), (keys0, keys1)
    assert any(rej1.get(k, 0) >= v + 1 for k, v in rej0.items()), (rej0, rej1)


def test_info_resp3_is_verbatim_or_bulk(server):
    with server.conn() as c:
        c.call("HELLO", "3")
        text = c.call("INFO", "server")
        assert isinstance(text, bytes) and b"server" in text.lower()
        if isinstance(text, Verbatim):
            assert text.fmt == b"txt"


def test_quit(server):
    with server.conn() as c:
        assert c.call("QUIT") == "OK"
        assert c.wait_closed(5) == b""


def test_quit_after_pipelined_commands(server):
    with server.conn() as c:
        c.send(b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n*1\r\n$4\r\nQUIT\r\n*1\r\n$4\r\nPING\r\n")
        assert c.read_reply() == "PONG"
        assert c.read_reply() == b"x"
        assert c.read_reply() == "OK"
        assert c.wait_closed(5) == b"", "nothing is answered after QUIT"


@pytest.mark.parametrize("args,want", [
    (("FOO",), "ERR unknown command 'FOO', with args beginning with: "),
    (("foo", "a", "b"), "ERR unknown command 'foo', with args beginning with: 'a' 'b' "),
    (("SET", "k", "v"), "ERR unknown command 'SET', with args beginning with: 'k' 'v' "),
    (("SL.NOPE", "k"), "ERR unknown command 'SL.NOPE', with args beginning with: 'k' "),
])
def test_unknown_command_error_shape(raw, args, want):
    # Redis 7's exact wording (checked against Debian's redis-server 7.0.15)
    assert error_of(raw, *args) == want
    assert raw.call("PING") == "PONG"


@pytest.mark.parametrize("args", [
    ("SL.POLICY", "a\r\n+OK", "k"),
    ("SL.TAKE", "k", 10, 60, "ALGORITHM", "x\r\n:1"),
    ("SL.TAKE", "k", "1\r\n", 60),
    ("SL.TAKE", "k", 10, "6\r\n0"),
    ("CL.THROTTLE", "k", "\r\n", 1, 1),
    ("SL.TAKE", "k", 10, 60, "BU\r\nRST", 1),
    ("CLIENT", "NO\r\nPE"),
    (b"FOO\r\nBAR!", b"a\r\nb"),
])
def test_error_replies_stay_one_line(raw, args):
    """Errors that quote what the client sent must not let it inject reply lines."""
    raw.send_command(*args)
    e = raw.read_reply()
    assert isinstance(e, Error), (args, e)
    assert "\r" not in e.message and "\n" not in e.message
    raw.send_command("PING")
    assert raw.read_reply() == "PONG", "the reply stream is out of step after %r" % (args,)


def test_long_arguments_in_errors_are_cut(raw):
    # (Redis shows up to 128 bytes of the name and of the arguments, and turns CR and LF
    # into spaces; the exact cut and replacement are not checked here)
    raw.send_command("NOPE" * 1000, "x" * 60000)
    e = raw.read_reply()
    assert isinstance(e, Error) and len(e.message) < 400, len(e.message)
    assert e.message.startswith("ERR unknown command 'NOPENOPE") and "', with args beginning with: 'xxx" in e.message


def test_unknown_subcommand(raw):
    assert error_of(raw, "CLIENT", "NOPE").startswith("ERR ")
    assert error_of(raw, "COMMAND", "NOPE").startswith("ERR ")
    assert raw.call("PING") == "PONG"


def test_empty_command_name(raw):
    assert error_of(raw, "").startswith("ERR unknown command ''")


# ---------------------------------------------------------------- inline commands

def test_inline_commands(raw, key):
    raw.send(b"PING\r\n")
    assert raw.read_reply() == "PONG"
    raw.send(b"PING\n")  # LF alone, as telnet or nc may send
    assert raw.read_reply() == "PONG"
    raw.send(b'ECHO "a b\\x41"\r\n')
    assert raw.read_reply() == b"a bA"
    raw.send(b"ECHO 'x y'\r\n")
    assert raw.read_reply() == b"x y"
    raw.send(("CL.THROTTLE %s 15 30 60 1\r\n" % key).encode())
    assert raw.read_reply() == [0, 16, 15, -1, 2]
    # several inline commands in one packet, mixed with a multibulk one, and a blank line
    raw.send(b"PING\r\n\r\nECHO one\r\n*2\r\n$4\r\nECHO\r\n$3\r\ntwo\r\nECHO three\r\n")
    assert [raw.read_reply() for _ in range(4)] == ["PONG", b"one", b"two", b"three"]


def test_inline_split_across_packets(raw):
    for part in (b"EC", b"HO ", b"split", b"\r", b"\n"):
        raw.send(part)
        time.sleep(0.01)
    assert raw.read_reply() == b"split"


def test_inline_unknown_command(raw):
    raw.send(b"NOPE a\r\n")
    e = raw.read_reply()
    assert isinstance(e, Error) and e.message == "ERR unknown command 'NOPE', with args beginning with: 'a' ", e
    assert raw.call("PING") == "PONG"


# ---------------------------------------------------------------- requirepass

PASSWORD = "s3cret-pass"
# Redis 7's exact wording, final period included (Debian's redis-server 7.0.15 answers it
# so; docs/commands.md omits the period)
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."


@pytest.fixture
def locked(make_server):
    return make_server(password=PASSWORD)


def test_requirepass_noauth(locked, key):
    with locked.conn(auth=False) as c:
        for args in (("CL.THROTTLE", key, 15, 30, 60), ("SL.TAKE", key, 1, 60), ("PING",), ("INFO",),
                     ("CLIENT", "SETNAME", "x"), ("NOPE",)):
            assert error_of(c, *args) == "NOAUTH Authentication required.", args
        assert error_of(c, "HELLO", "3").startswith("NOAUTH"), "HELLO without AUTH"
        assert error_of(c, "AUTH", "wrong") == WRONGPASS
        assert error_of(c, "AUTH", "default", "wrong") == WRONGPASS
        assert error_of(c, "PING") == "NOAUTH Authentication required.", "still locked after a bad AUTH"
        assert c.call("AUTH", PASSWORD) == "OK"
        assert c.call("PING") == "PONG"
        assert c.call("CL.THROTTLE", key, 15, 30, 60) == [0, 16, 15, -1, 2]
    with locked.conn(auth=False) as c:
        assert c.call("AUTH", "default", PASSWORD) == "OK"
        assert c.call("CL.THROTTLE", key, 15, 30, 60) == [0, 16, 14, -1, 4]
    with locked.conn(auth=False) as c:
        assert c.call("QUIT") == "OK", "QUIT needs no AUTH"
        c.wait_closed(5)


def test_secrets_hidden_from_ps(make_server, key):
    """--requirepass and --http-token are masked in the process's arguments, which every
    local user can read (ps, /proc/PID/cmdline), and still work; both spellings."""
    s = make_server(args=["--http-token=tok-sekrit"], password=PASSWORD)
    with open("/proc/%d/cmdline" % s.proc.pid, "rb") as f:
        args = f.read().split(b"\0")
    assert PASSWORD.encode() not in b" ".join(args), args
    assert b"tok-sekrit" not in b" ".join(args), args
    assert b"*" * len(PASSWORD) in args and b"--http-token=" + b"*" * 10 in args, args
    with s.conn() as c:
        assert c.call("CL.THROTTLE", key, 15, 30, 60) == [0, 16, 15, -1, 2]


def test_requirepass_hello_auth(locked):
    with locked.conn(auth=False) as c:
        assert error_of(c, "HELLO", "3", "AUTH", "default", "wrong") == WRONGPASS
        assert error_of(c, "PING").startswith("NOAUTH")
        m = c.call("HELLO", "3", "AUTH", "default", PASSWORD)
        assert isinstance(m, dict) and as_map(m)["proto"] == 3
        assert c.call("PING") == "PONG"
    with locked.conn(auth=False) as c:
        m = c.call("HELLO", "2", "AUTH", "default", PASSWORD, "SETNAME", "n")
        assert isinstance(m, list) and as_map(m)["proto"] == 2
        assert c.call("CLIENT", "GETNAME") == b"n"


def test_requirepass_inline(locked):
    with locked.conn(auth=False) as c:
        c.send(b"PING\r\n")
        e = c.read_reply()
        assert isinstance(e, Error) and e.message == "NOAUTH Authentication required.", e
        c.send(("AUTH %s\r\n" % PASSWORD).encode())
        assert c.read_reply() == "OK"
        c.send(b"PING\r\n")
        assert c.read_reply() == "PONG"


def test_requirepass_redis_py(locked, key):
    r = locked.redis()
    assert r.ping() is True
    assert r.execute_command("CL.THROTTLE", key, 15, 30, 60) == [0, 16, 15, -1, 2]
    r.close()
    bad = redis.Redis(host=locked.host, port=locked.port, password="wrong", socket_timeout=5)
    # redis-py 4.3 raises a plain ResponseError for WRONGPASS (with a real Redis too)
    with pytest.raises((redis.AuthenticationError, redis.ResponseError), match="WRONGPASS"):
        bad.ping()
    nopw = redis.Redis(host=locked.host, port=locked.port, socket_timeout=5)
    with pytest.raises(redis.AuthenticationError):
        nopw.ping()


def test_requirepass_redis_cli(locked, key):
    out = locked.redis_cli("CL.THROTTLE", key, 15, 30, 60)
    assert out.returncode == 0 and out.stdout == b"0\n16\n15\n-1\n2\n", out
    out = locked.redis_cli("-3", "HELLO", "3")
    assert out.returncode == 0 and b"proto" in out.stdout, out


# ---------------------------------------------------------------- other limits

def connect_when_free(s, timeout=5):
    """A connection that PING answers; the server notices closed connections (ours, the
    start-up probe's) asynchronously, so a slot may free up a moment late: poll."""
    deadline = time.monotonic() + timeout
    while True:
        c = s.conn()
        c.send_command("PING")
        try:
            if c.read_reply(2) == "PONG":
                return c
        except Exception:
            pass
        c.close()
        assert time.monotonic() < deadline, "no free client slot within %ss" % timeout
        time.sleep(0.05)


def test_maxclients(make_server):
    s = make_server(args=["--maxclients", "2"])
    a = connect_when_free(s)
    b = connect_when_free(s)
    try:
        with s.conn() as c:
            got = c.wait_closed(5)
            assert got == b"-ERR max number of clients reached\r\n", got
        assert a.call("PING") == "PONG" and b.call("PING") == "PONG", "the refusal leaves the others alone"
        a.close()
        connect_when_free(s).close()
    finally:
        a.close()
        b.close()


def test_max_key_bytes(make_server):
    s = make_server(args=["--max-key-bytes", "16"])
    with s.conn() as c:
        assert as_map(c.call("SL.TAKE", "k" * 16, 1, 60))["allowed"] == 1
        assert error_of(c, "SL.TAKE", "k" * 17, 1, 60).startswith("ERR ")
        assert error_of(c, "CL.THROTTLE", "k" * 17, 1, 1, 60).startswith("ERR ")
        assert c.call("PING") == "PONG"


def test_max_request_bytes(make_server):
    s = make_server(args=["--max-request-bytes", "1024"])
    with s.conn() as c:
        assert c.call("ECHO", "x" * 900) == b"x" * 900
        c.send(b"*2\r\n$4\r\nECHO\r\n$2000\r\n")  # the header alone is over the cap
        got = c.wait_closed(5)
        assert got.startswith(b"-ERR Protocol error: "), got
    s.assert_serving()


def test_idle_timeout(make_server):
    s = make_server(args=["--idle-timeout", "1"])
    with s.conn() as idle, s.conn() as busy:
        t0 = time.monotonic()
        deadline = t0 + 6
        closed = False
        while time.monotonic() < deadline:
            assert busy.call("PING") == "PONG", "an active connection is not idle"
            try:
                idle.sock.settimeout(0.2)
                data = idle.sock.recv(100)
                if data == b"":
                    closed = True
                    break
            except socket.timeout:
                pass
            except ConnectionResetError:
                closed = True
                break
        assert closed, "an idle connection was not closed within 6 s of a 1 s idle timeout"
        assert time.monotonic() - t0 >= 0.9, "closed before the idle timeout"


def test_max_memory_evicts(make_server):
    s = make_server(args=["--max-memory", "1m"])
    n = 50000  # several MB of state at any per-key cost: well past the cap
    with s.conn(timeout=60) as c:
        replies = pipeline(c, [("SL.TAKE", "mem:%d" % i, 1, 3600) for i in range(n)])
        bad = [(i, r) for i, r in enumerate(replies) if isinstance(r, Error) or as_map(r)["allowed"] != 1]
        assert not bad, "a new key under a memory cap: evict the idlest, admit it; got %r" % (bad[:3],)
        info = info_sections(c.call("INFO").decode())
        fields = dict(info.get("stats", {}), **info.get("memory", {}), **info.get("keyspace", {}))
        evicted = int_fields(fields, "evict")
        assert evicted and max(evicted.values()) > 0, fields
        keys = int_fields(fields, "keys")
        assert keys and min(v for k, v in keys.items() if "evict" not in k and "reclaim" not in k) < n, fields
        # the newest key is held: it was just drained
        assert as_map(c.call("SL.TAKE", "mem:%d" % (n - 1), 1, 3600))["allowed"] == 0
    s.assert_serving()


def listening_addresses(port):
    """Local addresses of the TCP sockets listening on port (IPv4 and IPv6)."""
    out = []
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    addr, p = fields[1].rsplit(":", 1)
                    if int(p, 16) == port and fields[3] == "0A":  # LISTEN
                        out.append(addr)
        except FileNotFoundError:
            pass
    return out


def test_default_bind_is_loopback(make_server):
    s = make_server(start=False)
    s.bind_flag = False
    s.start()
    addrs = listening_addresses(s.port)
    assert addrs, "no listening socket found for port %d" % s.port
    # 127.0.0.1 as /proc/net/tcp writes it (little-endian hex); nothing on 0.0.0.0 or ::
    assert set(addrs) == {"0100007F"}, addrs


def test_a_client_not_accepted_for_want_of_memory_is_accepted_later(make_server, monkeypatch):
    """libuv polls a listener no more while a client on it waits to be accepted: a
    worker that could not allocate the connection used to stop accepting on that port
    for good. The hook fails the first accepts as out of memory; each client waits for
    the worker's next tick (each second) instead, on both ports, and is served."""
    monkeypatch.setenv("SLUICED_DEBUG_ACCEPT_FAIL", "3")
    http = free_port()
    s = make_server(args=["--threads", "1", "--http-port", str(http)])
    t0 = time.monotonic()
    with s.conn(timeout=10.0) as c:
        assert c.call("PING") == "PONG"
    with socket.create_connection(("127.0.0.1", http), timeout=10.0) as h:
        h.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = b""
        while not got.endswith(b"\n") or b"\r\n\r\n" not in got:
            chunk = h.recv(4096)
            if not chunk:
                break
            got += chunk
        assert got.startswith(b"HTTP/1.1 200"), got
    assert time.monotonic() - t0 < 10
    assert "out of memory; the client waits" in s.stderr()
    # the hook spent, accepts are at once again
    for _ in range(5):
        with s.conn(timeout=0.9) as c:
            assert c.call("PING") == "PONG"
