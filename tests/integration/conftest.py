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
import subprocess
import sys
import tempfile
import uuid

import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from respclient import Conn, Error  # noqa: E402
from harness import (ROOT, SANITIZER_MARKS, ServerProcess, binary, failed, free_port,  # noqa: E402,F401
                     pytest_runtest_makereport)

START_TIMEOUT = 20.0  # a sanitizer build starts slower
STOP_TIMEOUT = 15.0   # SIGTERM: finish in-flight work, write the snapshot, exit


class Sluiced(ServerProcess):
    """One sluiced process."""

    name = "sluiced"
    start_timeout = START_TIMEOUT
    stop_timeout = STOP_TIMEOUT

    def __init__(self, args=(), password=None, workdir=None):
        super().__init__()
        self.binary = binary("SLUICED", "sluiced")
        self.extra = list(args)
        self.password = password
        if password is not None:
            self.extra += ["--requirepass", password]
        self.workdir = workdir or tempfile.mkdtemp(prefix="sluiced-it-")
        self.host = "127.0.0.1"
        self.stderr_path = None
        self.returncode = None
        self.runs = 0
        self.bind_flag = True  # False: start without --bind (its default must be 127.0.0.1)
        self.preexec = None    # run in the child before sluiced starts (a lowered rlimit, say)

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
                                         stdout=err, stderr=err, cwd=self.workdir,
                                         preexec_fn=self.preexec)
        self.returncode = None
        return self

    def spawn(self):
        return self.launch(self.port).proc

    def start(self, port=None):
        if not os.access(self.binary, os.X_OK):
            pytest.fail("sluiced is not built: %s (run make; or set SLUICED=path)" % self.binary)
        return super().start(port)

    def ping(self):
        with Conn(self.host, self.port, timeout=2.0) as c:
            c.send_command("PING")
            r = c.read_reply()
            # With --requirepass a PING answers NOAUTH: the server is up all the same.
            return r == "PONG" or (isinstance(r, Error) and r.code == "NOAUTH")

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""

    output = stderr

    def stop(self, check=True):
        """SIGTERM by PID; SIGKILL after STOP_TIMEOUT. Returns the exit status. With check,
        asserts a clean exit 0 and no sanitizer report."""
        if self.proc is None:
            return None
        self.returncode, killed = self.terminate()
        if check:
            err = self.stderr()
            if killed:
                pytest.fail("sluiced did not exit within %.0fs of SIGTERM (killed); stderr:\n%s"
                            % (STOP_TIMEOUT, err))
            assert self.returncode == 0, "sluiced exited %s on SIGTERM; stderr:\n%s" % (self.returncode, err)
            for mark in SANITIZER_MARKS:
                assert mark not in err, "sanitizer report in sluiced's stderr:\n%s" % err
        return self.returncode

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
    if failed(request.node) and "server" in request.fixturenames:
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
    if failed(request.node):
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


def write(path, text):
    """Writes a file the way an operator should (a new file renamed over the old), so that a
    sluiced reloading it never reads it half written."""
    tmp = str(path) + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, str(path))


@pytest.fixture
def config_server(make_server, tmp_path):
    """A factory: config_server(text, args=[...]) -> a started Sluiced on that config file
    (s.config its path) with HTTP on a port of its own (s.url)."""
    def make(text, args=()):
        cfg = tmp_path / "sluice.yaml"
        write(cfg, text)
        http = free_port()
        s = make_server(args=["--config", str(cfg), "--http-port", str(http)] + list(args))
        s.config = cfg
        s.url = "http://127.0.0.1:%d" % http
        return s
    return make


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
