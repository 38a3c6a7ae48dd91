"""The harness for sluice-redis.so's tests: real redis-server 7 (Debian's), started
by the tests on free 127.0.0.1 ports with --loadmodule, stopped by PID.

Each server gets its own working directory (RDB, AOF, cluster config), --save '' and
--appendonly no unless a test asks otherwise. The module: $SLUICE_MODULE, else
build/lib/sluice-redis.so (what `make` builds). Run: make test-module, or
/usr/bin/python3 -m pytest -q tests/module
"""

import os
import shutil
import sys
import tempfile
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))  # respclient: RESP3 replies
sys.path.insert(0, os.path.join(ROOT, "tests", "testdata"))     # command_cases
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))          # harness
from harness import failed, free_port, pytest_runtest_makereport  # noqa: E402,F401
from redis_server import RedisServer, cluster_port, module_path  # noqa: E402,F401


@pytest.fixture(scope="module")
def server():
    """One redis-server with the module for a whole test file."""
    workdir = tempfile.mkdtemp(prefix="sluice-module-")
    s = RedisServer(workdir).start()
    yield s
    s.stop()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def make_server(request, tmp_path):
    """A factory: make_server(name, args=[...]) -> a started RedisServer, stopped at
    the end of the test. Its log is printed when the test fails."""
    started = []

    def make(name="redis", args=(), start=True, **kw):
        s = RedisServer(str(tmp_path / name), args=args, **kw)
        started.append(s)
        return s.start() if start else s

    yield make
    if failed(request.node):
        for s in started:
            sys.stderr.write("---- redis-server %s log ----\n%s\n" % (s.workdir, s.log()))
    for s in started:
        s.stop()


@pytest.fixture
def r(server):
    c = server.client()
    yield c
    c.close()


@pytest.fixture
def key(request):
    return "mt:%s:%s" % (request.node.name, uuid.uuid4().hex[:8])


def wait_for(pred, what, timeout=20.0):
    """Waits until pred() is true; fails the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    pytest.fail("timed out waiting for " + what)


@pytest.fixture
def replicated(make_server):
    """A primary and its replica, linked: their clients (primary, replica)."""
    primary = make_server("primary")
    replica = make_server("replica", start=False)
    replica.args = ["--replicaof", "127.0.0.1", str(primary.port)]
    replica.start()
    p, rr = primary.client(), replica.client()
    wait_for(lambda: rr.info("replication").get("master_link_status") == "up", "the replica link")
    yield p, rr
    p.close()
    rr.close()
