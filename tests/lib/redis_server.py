"""A real redis-server for the tests, started on a free 127.0.0.1 port and stopped by PID:
with sluice-redis.so loaded ($SLUICE_MODULE, else build/lib/sluice-redis.so) or without.
Shared by tests/module (the module's own tests) and tests/integration (sluiced on a
central store)."""

import os
import socket
import subprocess

import pytest
import redis

from harness import ServerProcess, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
START_TIMEOUT = 20.0
STOP_TIMEOUT = 20.0


def module_path():
    p = os.environ.get("SLUICE_MODULE", "build/lib/sluice-redis.so")
    return p if os.path.isabs(p) else os.path.join(ROOT, p)


def cluster_port():
    """A free port whose cluster bus port (port + 10000) is free too."""
    for _ in range(200):
        p = free_port()
        if p + 10000 > 65535:
            continue
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", p + 10000))
            return p
        except OSError:
            continue
    pytest.fail("no free port pair for a cluster node")


class RedisServer(ServerProcess):
    """One redis-server process with the module loaded."""

    name = "redis-server"
    start_timeout = START_TIMEOUT
    stop_timeout = STOP_TIMEOUT

    def __init__(self, workdir, args=(), module=True, module_args=()):
        super().__init__()
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.args = list(args)
        self.module = module
        self.module_args = list(module_args)
        self.log_path = os.path.join(workdir, "redis.log")

    def argv(self):
        a = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", self.workdir, "--save", "", "--appendonly", "no",
             "--daemonize", "no", "--logfile", self.log_path, "--protected-mode", "yes"]
        if self.module:
            a += ["--loadmodule", module_path()] + self.module_args
        return a + self.args

    def start(self, port=None, expect_ready=True):
        """Starts on `port`, else on the port it had (a restart), else a free one."""
        if self.module and not os.path.exists(module_path()):
            pytest.fail("the module is not built: %s (run make)" % module_path())
        return super().start(port or self.port, expect_ready)

    def spawn(self):
        return subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                cwd=self.workdir)

    def ping(self):
        # loading an RDB or AOF answers LOADING (an exception) until done
        c = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=2,
                        socket_connect_timeout=2)
        try:
            return c.ping()
        finally:
            c.close()

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-20000:]
        except OSError:
            return ""

    output = log

    def stop(self):
        """SIGTERM by PID (Redis then writes its RDB if saving is on, flushes the AOF);
        SIGKILL after STOP_TIMEOUT. Returns the exit status."""
        return self.terminate()[0]

    def client(self, **kw):
        kw.setdefault("socket_timeout", 10)
        kw.setdefault("socket_connect_timeout", 5)
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def conn(self, proto=2):
        from respclient import Conn
        c = Conn("127.0.0.1", self.port, timeout=5.0)
        if proto == 3:
            c.call("HELLO", "3")
        c.proto = proto
        return c

    def cli(self, *args, timeout=30):
        return subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.port)] +
                              [str(a) for a in args], capture_output=True, timeout=timeout)
