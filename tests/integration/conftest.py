"""The harness for sluiced's integration tests: real clients over 127.0.0.1.

Each test module gets its own sluiced (fixture `server`), started on a free port with
`--port P --http-port 0 --threads 2 --bind 127.0.0.1`; tests that need other flags
start their own through `make_server`. Every server is stopped by its PID: SIGTERM, then
SIGKILL if it has not exited within STOP_TIMEOUT; the stop asserts exit status 0 and no
sanitizer report in its stderr. A failing test prints the server's stderr.

The binary: $SLUICED, else build/asan/bin/sluiced (ASan+UBSan watch the server), else
build/bin/sluiced. Run: /usr/bin/python3 -m pytest -q tests/integration
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from respclient import Conn, Error, Closed, TimedOut  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
START_TIMEOUT = 20.0  # a sanitizer build starts slower
STOP_TIMEOUT = 15.0   # SIGTERM: finish in-flight work, write the snapshot, exit
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "ThreadSanitizer", "SUMMARY: UndefinedBehaviorSanitizer")


def sluiced_path():
    env = os.environ.get("SLUICED")
    if env:
        return env if os.path.isabs(env) else os.path.join(ROOT, env)
    for p in ("build/asan/bin/sluiced", "build/bin/sluiced"):
        full = os.path.join(ROOT, p)
        if os.access(full, os.X_OK):
            return full
    return os.path.join(ROOT, "build/bin/sluiced")


def free_port():
    """A port nobody listens on now: bind port 0, read it, close. (A tiny race with
    other processes remains; Sluiced.start retries on a failed start.)"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Sluiced:
    """One sluiced process."""

    def __init__(self, args=(), password=None, workdir=None):
        self.binary = sluiced_path()
        self.extra = list(args)
        self.password = password
        if password is not None:
            self.extra += ["--requirepass", password]
        self.workdir = workdir or tempfile.mkdtemp(prefix="sluiced-it-")
        self.proc = None
        self.port = None
        self.host = "127.0.0.1"
        self.stderr_path = None
        self.returncode = None
        self.runs = 0
        self.bind_flag = True  # False: start without --bind (its default must be 127.0.0.1)

    @property
    def addr(self):
        return (self.host, self.port)

    def argv(self):
        bind = ["--bind", "127.0.0.1"] if self.bind_flag else []
        return [self.binary, "--port", str(self.port), "--http-port", "0",
                "--threads", "2"] + bind + self.extra

    def launch(self, port=None):
        """Starts the process without waiting for it; see wait_ready()."""
        self.port = port or free_port()
        self.runs += 1
        self.stderr_path = os.path.join(self.workdir, "sluiced.%d.stderr" % self.runs)
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, env=env,
                                         stdout=err, stderr=err, cwd=self.workdir)
        self.returncode = None
        return self

    def start(self, port=None):
        if not os.access(self.binary, os.X_OK):
            pytest.fail("sluiced is not built: %s (run make; or set SLUICED=path)" % self.binary)
        last = ""
        for attempt in range(3):
            self.launch(port)
            if self.wait_ready():
                return self
            last = self.stderr()
            if self.proc.poll() is None:
                self.kill()
                pytest.fail("sluiced did not answer PING within %.0fs on port %d; stderr:\n%s"
                            % (START_TIMEOUT, self.port, last))
            if port is not None or "in use" not in last.lower():
                break  # retry elsewhere only when the free port was taken meanwhile
        pytest.fail("sluiced exited during start-up (status %s); argv %s; stderr:\n%s"
                    % (self.proc.returncode, self.argv(), last))

    def wait_ready(self):
        """True once PING answers; False if the process exited or START_TIMEOUT passed."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with Conn(self.host, self.port, timeout=2.0) as c:
                    c.send_command("PING")
                    r = c.read_reply()
                    # With --requirepass a PING answers NOAUTH: the server is up all the same.
                    if r == "PONG" or (isinstance(r, Error) and r.code == "NOAUTH"):
                        return True
            except (OSError, Closed, TimedOut):
                pass
            time.sleep(0.02)
        return False

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self, check=True):
        """SIGTERM by PID; SIGKILL after STOP_TIMEOUT. Returns the exit status. With check,
        asserts a clean exit 0 and no sanitizer report."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()
                if check:
                    pytest.fail("sluiced did not exit within %.0fs of SIGTERM (killed); stderr:\n%s"
                                % (STOP_TIMEOUT, self.stderr()))
        self.returncode = self.proc.returncode
        if check:
            err = self.stderr()
            assert self.returncode == 0, "sluiced exited %s on SIGTERM; stderr:\n%s" % (self.returncode, err)
            for mark in SANITIZER_MARKS:
                assert mark not in err, "sanitizer report in sluiced's stderr:\n%s" % err
        return self.returncode

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    # -- clients
    def conn(self, timeout=5.0, auth=True):
        c = Conn(self.host, self.port, timeout=timeout)
        if auth and self.password is not None:
            assert c.call("AUTH", self.password) == "OK"
        return c

    def redis(self, **kw):
        import redis
        kw.setdefault("socket_timeout", 10)
        kw.setdefault("socket_connect_timeout", 5)
        if self.password is not None:
            kw.setdefault("password", self.password)
        return redis.Redis(host=self.host, port=self.port, **kw)

    def redis_cli(self, *args, input=None, resp=None, timeout=10):
        cmd = ["redis-cli", "-h", self.host, "-p", str(self.port)]
        if resp:
            cmd.append("-%d" % resp)
        if self.password is not None:
            cmd += ["--no-auth-warning", "-a", self.password]
        cmd += [str(a) for a in args]
        return subprocess.run(cmd, input=input, capture_output=True, timeout=timeout)

    def assert_serving(self):
        """The server still answers PING on a fresh connection."""
        assert self.alive(), "sluiced died (status %s); stderr:\n%s" % (self.proc.returncode, self.stderr())
        with self.conn() as c:
            assert c.call("PING") == "PONG"


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def _failed(request):
    for when in ("setup", "call"):
        rep = getattr(request.node, "rep_" + when, None)
        if rep is not None and rep.failed:
            return True
    return False


def _report_stderr(servers, title):
    for s in servers:
        text = s.stderr()
        if len(text) > 20000:
            text = "...\n" + text[-20000:]
        sys.stderr.write("---- %s: sluiced %s (port %s) stderr ----\n%s\n" % (title, s.binary, s.port, text))


@pytest.fixture(scope="module")
def server(request):
    """One sluiced for the whole module, default flags."""
    s = Sluiced().start()
    yield s
    try:
        s.stop()
    except BaseException:
        _report_stderr([s], "module teardown")
        raise
    finally:
        shutil.rmtree(s.workdir, ignore_errors=True)


@pytest.fixture(autouse=True)
def _server_stderr_on_failure(request):
    yield
    if _failed(request) and "server" in request.fixturenames:
        _report_stderr([request.getfixturevalue("server")], request.node.name)


@pytest.fixture
def make_server(request, tmp_path):
    """A factory: make_server(args=[...], password=...) -> a started Sluiced, stopped
    (and checked) at the end of the test unless the test stopped it itself."""
    started = []

    def make(args=(), password=None, start=True):
        s = Sluiced(args=args, password=password, workdir=str(tmp_path))
        started.append(s)
        return s.start() if start else s

    yield make
    if _failed(request):
        _report_stderr(started, request.node.name)
    errors = []
    for s in started:
        if s.alive():
            try:
                s.stop()
            except BaseException as e:  # keep stopping the others
                errors.append(e)
    if errors:
        raise errors[0]


@pytest.fixture
def key(request):
    """A key no other test uses."""
    return "it:%s:%s" % (request.node.name, uuid.uuid4().hex[:8])


@pytest.fixture
def r(server):
    """redis-py on the module's server (RESP2: redis-py 4.3 cannot speak RESP3)."""
    c = server.redis()
    yield c
    c.close()


@pytest.fixture
def raw(server):
    """A raw RESP connection to the module's server."""
    c = server.conn()
    yield c
    c.close()
