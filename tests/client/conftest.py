"""The harness for the C RESP client's tests (libsluice_client, include/sluice_resp.h).

tests/client/resp_driver (the blocking and the async client, request lines on stdin,
one JSON answer a line on stdout) runs against a real sluiced ($SLUICED, else
build/asan/bin/sluiced, else build/bin/sluiced) on free 127.0.0.1 ports, stopped by
its PID. The driver: $RESP_DRIVER, else build/asan/tests/resp_driver (the sanitizers
watch it), else build/tests/resp_driver.

A Tap sits between the driver and sluiced when a test wants the bytes: a TCP relay on
a free port that keeps, per connection, what the client sent and what the server
answered, so that redis-py can encode the same commands and read the very same
replies (Tap.replies), field for field.

Run: make test-clients (or /usr/bin/python3 -m pytest -q tests/client).
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from harness import (ROOT, SANITIZER_MARKS, JsonLineDriver, ServerProcess, binary, failed, free_port, sigstop,  # noqa: E402,F401
                     pytest_runtest_makereport)

ANSWER_TIMEOUT = 30.0

CONFIG = """\
policies:
  api:
    limit: 100
    period: 1h
    global: {limit: 2, period: 1h}
    tiers:
      paid: {limit: 1000, period: 1h}
  dry:
    limit: 1
    period: 1h
    shadow: true
"""


def driver_path():
    p = os.environ.get("RESP_DRIVER")
    if p:
        return p if os.path.isabs(p) else os.path.join(ROOT, p)
    for cand in ("build/asan/tests/resp_driver", "build/tests/resp_driver"):
        full = os.path.join(ROOT, cand)
        if os.access(full, os.X_OK):
            return full
    pytest.fail("tests/client/resp_driver is not built (cmake --build build/asan "
                "--target resp_driver)")


class Sluiced(ServerProcess):
    """A sluiced with the policies above, RESP only."""

    name = "sluiced"

    def __init__(self, password=None):
        super().__init__()
        self.binary = binary("SLUICED", "sluiced")
        self.dir = tempfile.mkdtemp(prefix="sluice-client-")
        self.err = os.path.join(self.dir, "sluiced.stderr")
        self.config = os.path.join(self.dir, "sluice.yaml")
        with open(self.config, "w") as f:
            f.write(CONFIG)
        self.password = password

    def argv(self):
        a = [self.binary, "--port", str(self.port), "--http-port", "0", "--threads", "2",
             "--bind", "127.0.0.1", "--config", self.config]
        return a + (["--requirepass", self.password] if self.password else [])

    def spawn(self):
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        with open(self.err, "wb") as e:
            return subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=e, stderr=e,
                                    cwd=self.dir, env=env)

    def start(self):
        if not os.access(self.binary, os.X_OK):
            pytest.fail("sluiced is not built: %s" % self.binary)
        return super().start()

    def ping(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))

    def output(self):
        try:
            with open(self.err, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def redis(self):
        import redis
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password,
                           socket_timeout=10)

    def stop(self, check=True):
        status, killed = self.terminate()
        if check:
            out = self.output()
            assert status == 0 and not killed, out
            for mark in SANITIZER_MARKS:
                assert mark not in out, out


class Driver(JsonLineDriver):
    """One resp_driver process: send() lines, answer() the JSON lines it prints."""

    def __init__(self, port, *flags):
        super().__init__([driver_path(), "--port", port] + list(flags),
                         ubsan="print_stacktrace=1:halt_on_error=1",
                         answer_timeout=ANSWER_TIMEOUT)

    def call(self, line):
        """One line, one answer."""
        self.send(line)
        return self.answer()

    def close(self):
        """Ends stdin: the driver answers what is pending, frees its contexts and exits 0
        (1 if a callback came twice), with no sanitizer report. Returns what it printed
        after the last answer read."""
        rest = self.finish(timeout=60)
        if rest is None:
            return []
        assert rest and rest[-1] == {"done": True, "answered_twice": 0}, rest
        return rest[:-1]


class Tap:
    """A TCP relay from a free port to 127.0.0.1:upstream that keeps both directions of
    each connection it relays, in the order the connections were accepted.

    hold() keeps what the server answers from the client (as a network that delays
    packets would) until release() passes it on; the log records it as it arrives."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.held = None  # while holding: [(socket, bytes)] the client has yet to get
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(8)
        self.port = self.srv.getsockname()[1]
        self.conns = []  # [{"sent": bytearray, "answered": bytearray}]
        self.lock = threading.Lock()
        self.gate = threading.Lock()  # the server-to-client sends, and hold()/release()
        self.threads = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()

    def _accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self.upstream))
            rec = {"sent": bytearray(), "answered": bytearray()}
            with self.lock:
                self.conns.append(rec)
            for a, b, key in ((c, u, "sent"), (u, c, "answered")):
                t = threading.Thread(target=self._pipe, args=(a, b, rec[key], key == "answered"),
                                     daemon=True)
                t.start()
                self.threads.append(t)

    def _pipe(self, src, dst, log, holdable):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            with self.lock:
                log.extend(data)
            if not holdable:
                dst.sendall(data)
                continue
            with self.gate:
                # Under the gate, so that release() cannot send held bytes after these.
                if self.held is not None:
                    self.held.append((dst, data))
                else:
                    dst.sendall(data)

    def hold(self):
        """From now on, the server's answers wait here."""
        with self.gate:
            self.held = []

    def release(self):
        """Passes on what was held, in order, and stops holding."""
        with self.gate:
            for dst, data in self.held:
                dst.sendall(data)
            self.held = None

    def answered_len(self, i):
        """How many bytes the server has answered on connection i so far."""
        with self.lock:
            return len(self.conns[i]["answered"]) if i < len(self.conns) else 0

    def close(self):
        self.srv.close()
        for t in self.threads:
            t.join(timeout=10)

    def conn(self, i):
        with self.lock:
            return {k: bytes(v) for k, v in self.conns[i].items()}


def redis_py_replies(data, n):
    """The first n replies in data (bytes a server sent), read by redis-py's own parser
    (redis.Connection.read_response, on one end of a socket pair); error replies come
    back as the redis.exceptions they are."""
    import redis
    a, b = socket.socketpair()

    class Fed(redis.Connection):
        def _connect(self):
            return a

    conn = Fed()
    conn.connect()
    b.sendall(data)
    b.close()
    out = []
    for _ in range(n):
        try:
            out.append(conn.read_response())
        except redis.exceptions.ResponseError as e:
            out.append(e)
    conn.disconnect()
    return out


def redis_py_commands(*cmds):
    """The bytes redis-py sends for these commands (Connection.pack_command)."""
    import redis
    conn = redis.Connection()
    return b"".join(b"".join(conn.pack_command(*c)) for c in cmds)


@pytest.fixture
def make_sluiced(request):
    """make_sluiced(password=None) -> a started Sluiced, stopped (and checked) at the end."""
    started = []

    def make(password=None):
        s = Sluiced(password).start()
        started.append(s)
        return s

    yield make
    if failed(request.node):
        for s in started:
            sys.stderr.write("---- sluiced (port %s) ----\n%s\n" % (s.port, s.output()))
    for s in started:
        if s.alive():
            s.stop()


@pytest.fixture
def make_driver(request):
    """make_driver(port, *flags) -> a Driver, closed (and checked) at the end."""
    started = []

    def make(port, *flags):
        d = Driver(port, *flags)
        started.append(d)
        return d

    yield make
    for d in started:
        if failed(request.node):
            sys.stderr.write("---- resp_driver stderr ----\n%s\n" % "".join(d.stderr))
        if not d.closed:
            d.close()


class Stopped:
    """sluiced stopped (SIGSTOP) for the with block, resumed (SIGCONT) after it. kill()
    returns before the signal has taken hold: the block starts once every thread of
    sluiced is stopped, so that none answers a call sent inside it."""

    def __init__(self, srv):
        self.pid = srv.proc.pid

    def __enter__(self):
        sigstop(self.pid)
        return self

    def __exit__(self, *exc):
        os.kill(self.pid, signal.SIGCONT)
