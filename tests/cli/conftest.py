"""The harness for the CLI's tests: they run the built `sluice` binary.

The binary: $SLUICE, else build/asan/bin/sluice (ASan+UBSan watch it), else
build/bin/sluice. `take` and `bench` against a server use a real sluiced ($SLUICED,
else build/asan/bin/sluiced, else build/bin/sluiced) started on a free 127.0.0.1
port with --http-port 0 and stopped by its PID.

Run: /usr/bin/python3 -m pytest -q tests/cli
"""

import os
import socket
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from harness import ROOT, SANITIZER_MARKS, ServerProcess, binary, free_port  # noqa: E402,F401


SLUICE = binary("SLUICE", "sluice")


def run(*args, check=None, timeout=120, cwd=None, env=None):
    """Runs `sluice ARGS` (env: variables to add); asserts no sanitizer report; check=N
    asserts the exit status."""
    if not os.access(SLUICE, os.X_OK):
        pytest.fail("sluice is not built: %s (run make; or set SLUICE=path)" % SLUICE)
    env = dict(os.environ, **(env or {}))
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    p = subprocess.run([SLUICE] + [str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=cwd)
    for mark in SANITIZER_MARKS:
        assert mark not in p.stderr, p.stderr
    if check is not None:
        assert p.returncode == check, "exit %d, stdout:\n%s\nstderr:\n%s" % (
            p.returncode, p.stdout, p.stderr)
    return p


def parse_table(out):
    """The simulate table as {name: {column: value}} (ints, the ratio a float, '-' kept)."""
    lines = out.splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith("algorithm "))
    cols = lines[i].split()
    rows = {}
    for l in lines[i + 1:]:
        if not l.strip():
            break
        vals = l.split()
        row = {}
        for c, v in zip(cols[1:], vals[1:]):
            if v == "-":
                row[c] = None
            elif c == "ratio" or "_ms" in c:
                row[c] = float(v)
            else:
                row[c] = int(v)
        rows[vals[0]] = row
    return rows


class Sluiced(ServerProcess):
    name = "sluiced"

    def __init__(self, http=False, extra=()):
        super().__init__()
        self.http = http
        self.extra = list(extra)
        self.http_port = 0
        self.binary = binary("SLUICED", "sluiced")
        self.dir = tempfile.mkdtemp(prefix="sluice-cli-")
        self.err = os.path.join(self.dir, "sluiced.stderr")

    def argv(self):
        return [self.binary, "--port", str(self.port), "--http-port", str(self.http_port),
                "--threads", "2", "--bind", "127.0.0.1"] + self.extra

    def spawn(self):
        self.http_port = free_port() if self.http else 0
        with open(self.err, "wb") as e:
            return subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=e, stderr=e,
                                    cwd=self.dir)

    def start(self):
        if not os.access(self.binary, os.X_OK):
            pytest.fail("sluiced is not built: %s" % self.binary)
        return super().start()

    def ping(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))

    def stderr(self):
        try:
            with open(self.err, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    output = stderr

    def stop(self, check=True):
        status, killed = self.terminate()
        if check:
            err = self.stderr()
            assert status == 0 and not killed, err
            for mark in SANITIZER_MARKS:
                assert mark not in err, err

    def require_http(self):
        """Skips the test when this sluiced does not listen for HTTP (the HTTP face may not
        be built into it yet); stops the server first."""
        try:
            socket.create_connection(("127.0.0.1", self.http_port), timeout=2.0).close()
        except OSError:
            self.stop()
            pytest.skip("this sluiced does not listen for HTTP on --http-port")

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port


@pytest.fixture(scope="module")
def sluiced():
    s = Sluiced().start()
    yield s
    s.stop()
