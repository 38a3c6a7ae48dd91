"""The harness for the cluster transport's tests (src/backend/cluster.c): a Redis Cluster
of real redis-server 7 processes (Debian's) on free 127.0.0.1 ports, made by `redis-cli
--cluster create`, and tests/backend/cluster_driver (the transport on a libuv loop, built
under ASan + UBSan in build/asan) fed commands on its stdin, answering one JSON line each.

The cluster is tests/lib/redis_cluster.py's, its nodes made by redis_harness's make_redis
fixture (one working directory each, stopped by PID); the module is loaded into them when it is
built.
Like redis_harness, this is no conftest: a test file imports the fixtures it uses. The driver:
$CLUSTER_DRIVER, else build/asan/tests/cluster_driver. Run: make test-backend, or
/usr/bin/python3 -B -m pytest -q -p no:cacheprovider tests/backend/test_cluster_transport.py
"""

import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from harness import SANITIZER_MARKS, free_port  # noqa: E402,F401
from redis_cluster import make_cluster, slot_of  # noqa: E402,F401
from redis_server import module_path  # noqa: E402,F401

def driver_path():
    p = os.environ.get("CLUSTER_DRIVER", "build/asan/tests/cluster_driver")
    p = p if os.path.isabs(p) else os.path.join(ROOT, p)
    if not os.access(p, os.X_OK):
        pytest.fail("the driver is not built: %s (cmake --build build/asan --target "
                    "cluster_driver)" % p)
    return p


class Driver:
    """One cluster_driver process: send(line) returns the command's id; answer(id)
    waits for its JSON answer. stop() ends stdin and asserts a clean exit: status 0
    (every command answered, none twice), no sanitizer report."""

    def __init__(self, seeds, args=()):
        self.argv = [driver_path()] + list(args) + [seeds]
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1",
                   UBSAN_OPTIONS="print_stacktrace=1")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.next_id = 0
        self.answers = {}
        self.stats = queue.Queue()
        self.duplicates = []
        self.cond = threading.Condition()
        self.stderr = b""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.err_reader = threading.Thread(target=self._read_err, daemon=True)
        self.err_reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            msg = json.loads(raw)
            with self.cond:
                if "id" in msg:
                    if msg["id"] in self.answers:
                        self.duplicates.append(msg)
                    self.answers[msg["id"]] = msg
                else:
                    self.stats.put(msg)
                self.cond.notify_all()

    def _read_err(self):
        self.stderr = self.proc.stderr.read()

    def write(self, lines):
        self.proc.stdin.write("".join(l + "\n" for l in lines).encode())
        self.proc.stdin.flush()

    def send_many(self, lines):
        """Sends every line in one write; returns their ids."""
        first = self.next_id + 1
        self.next_id += len(lines)
        self.write(lines)
        return list(range(first, self.next_id + 1))

    def send(self, line):
        return self.send_many([line])[0]

    def answer(self, cid, timeout=20):
        deadline = time.monotonic() + timeout
        with self.cond:
            while cid not in self.answers:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    pytest.fail("no answer to command %d; driver stderr:\n%s"
                                % (cid, self.stderr.decode(errors="replace")))
                self.cond.wait(min(left, 0.5))
            return self.answers[cid]

    def call(self, line, timeout=20):
        return self.answer(self.send(line), timeout)

    def value(self, line):
        """The reply's value; fails the test on a transport error or an error reply."""
        a = self.call(line)
        assert "err" not in a and a["type"] != "error", (line, a)
        return a["value"]

    def state(self):
        self.write(["#stats"])
        return self.stats.get(timeout=20)

    def stop(self, close_first=False):
        if close_first:
            self.write(["#close"])
        self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("the driver did not exit at the end of its input")
        self.reader.join(10)
        self.err_reader.join(10)
        err = self.stderr.decode(errors="replace")
        assert rc == 0, "driver exit status %s; stderr:\n%s" % (rc, err)
        assert not any(m in err for m in SANITIZER_MARKS), err
        assert not self.duplicates, self.duplicates
        return rc


@pytest.fixture
def make_driver():
    started = []

    def make(seeds, args=()):
        d = Driver(seeds, args)
        started.append(d)
        return d

    yield make
    for d in started:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
