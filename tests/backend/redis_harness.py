"""The harness for the redis backend's tests: tests/backend/redis_driver (the backend
on a uv loop, request lines on stdin, one JSON answer a line on stdout) against real
redis-server 7 processes, with sluice-redis.so loaded (the module's SL.DECIDE) or
not (the Lua script's EVALSHA), on free 127.0.0.1 ports, stopped by PID.

The driver: $REDIS_DRIVER, else build/asan/tests/redis_driver (the sanitizers watch
it), else build/tests/redis_driver. The module: as tests/module finds it
(build/lib/sluice-redis.so, the release build). Run: make test-backend.
"""

import importlib.util
import os
import socket
import sys
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from harness import SANITIZER_MARKS, JsonLineDriver, free_port  # noqa: E402,F401

# tests/module's RedisServer, loaded under a name of its own (both files are "conftest").
_spec = importlib.util.spec_from_file_location(
    "sluice_module_conftest_for_redis", os.path.join(ROOT, "tests", "module", "conftest.py"))
_module_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module_conftest)
RedisServer = _module_conftest.RedisServer

ANSWER_TIMEOUT = 20.0


def redis_driver_path():
    p = os.environ.get("REDIS_DRIVER")
    if p:
        return p if os.path.isabs(p) else os.path.join(ROOT, p)
    for cand in ("build/asan/tests/redis_driver", "build/tests/redis_driver"):
        full = os.path.join(ROOT, cand)
        if os.access(full, os.X_OK):
            return full
    pytest.fail("tests/backend/redis_driver is not built (cmake --build build/asan "
                "--target redis_driver)")


class RedisDriver(JsonLineDriver):
    """One redis_driver process: send() lines, answers() the JSON lines they print."""

    def __init__(self, store, *flags):
        super().__init__([redis_driver_path(), "--store", store] + list(flags),
                         answer_timeout=ANSWER_TIMEOUT)

    def answers(self, n):
        """The next n answers, sorted by request id (requests may complete out of order)."""
        got = [self.answer() for _ in range(n)]
        return sorted(got, key=lambda a: a.get("id", 0))

    def run(self, *lines):
        """Sends lines of requests and returns their answers by id."""
        self.send(*lines)
        return self.answers(len(lines))

    def stats(self):
        self.send("stats")
        a = self.answer()
        assert "stats" in a, a
        return a

    def close(self):
        """Ends stdin; the driver answers what is in flight, detaches and exits 0, with
        no sanitizer report."""
        return self.finish(timeout=30)


def _failing(request, failed_before):
    """Did the test fail? (No conftest here to keep each phase's report: the session's
    count of failures has grown by the time a fixture's teardown runs.)"""
    return request.session.testsfailed > failed_before


@pytest.fixture
def make_redis(request, tmp_path):
    """make_redis(module=True, args=[...]) -> a started RedisServer, stopped at the end."""
    started = []
    failed_before = request.session.testsfailed

    def make(name="redis", module=True, args=(), start=True):
        s = RedisServer(str(tmp_path / name), args=args, module=module)
        started.append(s)
        return s.start() if start else s

    yield make
    if _failing(request, failed_before):
        for s in started:
            sys.stderr.write("---- redis-server %s log ----\n%s\n" % (s.workdir, s.log()))
    for s in started:
        s.stop()


@pytest.fixture
def make_redis_driver(request):
    """make_redis_driver(url, *flags) -> a RedisDriver, closed (and checked) at the end."""
    started = []
    failed_before = request.session.testsfailed

    def make(store, *flags):
        d = RedisDriver(store, *flags)
        started.append(d)
        return d

    yield make
    for d in started:
        if _failing(request, failed_before):
            sys.stderr.write("---- redis_driver stderr ----\n%s\n" % "".join(d.stderr))
        if not d.closed:
            d.close()


@pytest.fixture
def garbage_server():
    """A TCP server on a free port that answers every connection with an HTTP error
    (not RESP), then closes it. Yields its port."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            try:
                c.settimeout(1)
                try:
                    c.recv(4096)
                except OSError:
                    pass
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass
            finally:
                c.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(timeout=5)
    srv.close()
