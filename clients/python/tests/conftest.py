"""The Python client's tests: the package from clients/python, and for the tests against a
real sluiced the project's harness (tests/lib/harness.py: free ports, a process stopped by
PID). The binary: $SLUICED, else build/asan/bin/sluiced, else build/bin/sluiced (the
harness's lookup).

Run: /usr/bin/python3 -m pytest -q clients/python/tests
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "lib"))
from harness import (SANITIZER_MARKS, ServerProcess, binary, failed, free_port,  # noqa: E402
                     pytest_runtest_makereport)  # noqa: F401 (pytest looks for it here)

def sluiced_binary():
    return binary("SLUICED", "sluiced")


class Sluiced(ServerProcess):
    """A sluiced with RESP on self.port and HTTP on self.http_port, 127.0.0.1 only."""

    name = "sluiced"

    def __init__(self, args=()):
        super().__init__()
        self.binary = sluiced_binary()
        self.extra = list(args)
        self.workdir = tempfile.mkdtemp(prefix="sluice-clientpy-")
        self.http_port = None
        self.log = os.path.join(self.workdir, "sluiced.log")

    def argv(self):
        return [self.binary, "--port", str(self.port), "--http-port", str(self.http_port),
                "--bind", "127.0.0.1", "--threads", "2"] + self.extra

    def spawn(self):
        self.http_port = free_port()
        with open(self.log, "wb") as out:
            return subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=out, cwd=self.workdir)

    def ping(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % self.http_port, timeout=2) as r:
            return json.load(r).get("status") == "ok"

    def output(self):
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.http_port

    def redis(self):
        import redis
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)

    def stop(self):
        status, killed = self.terminate()
        out = self.output()
        assert not killed, "sluiced did not stop on SIGTERM:\n" + out
        assert status == 0, "sluiced exited %s:\n%s" % (status, out)
        for mark in SANITIZER_MARKS:
            assert mark not in out, "sanitizer report:\n" + out


@pytest.fixture
def make_server(request):
    """A factory: make_server(args) -> a started Sluiced, stopped (and checked) at the end."""
    started = []

    def make(args=()):
        if not os.access(sluiced_binary(), os.X_OK):
            pytest.fail("sluiced is not built: %s (run make, or set SLUICED)" % sluiced_binary())
        s = Sluiced(args)
        started.append(s)
        return s.start()

    yield make
    for s in started:
        if failed(request.node):
            sys.stderr.write("---- sluiced (%s) output ----\n%s\n" % (s.binary, s.output()))
        try:
            s.stop()
        finally:
            shutil.rmtree(s.workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def server():
    """One sluiced (default flags) for a module's tests."""
    s = Sluiced()
    if not os.access(s.binary, os.X_OK):
        pytest.fail("sluiced is not built: %s (run make, or set SLUICED)" % s.binary)
    s.start()
    yield s
    try:
        s.stop()
    finally:
        shutil.rmtree(s.workdir, ignore_errors=True)
