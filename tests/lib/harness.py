"""What the pytest harnesses share (tests/integration: sluiced; tests/module: redis-server
with the module): free ports, a server process started on one and stopped by PID, and
knowing whether a test failed (so that its servers' output is shown).

A harness imports this module from its conftest.py (the conftest puts tests/lib on
sys.path) and re-exports pytest_runtest_makereport, which pytest only looks for there.
"""

import json
import os
import queue
import random
import signal
import socket
import subprocess
import threading
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# What a sanitizer writes when it finds something: a server or tool whose output has
# one of these failed, whatever its exit status.
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "ThreadSanitizer", "SUMMARY: UndefinedBehaviorSanitizer")


def binary(env, name):
    """A built program: $env when set (relative to the repository root), else
    build/asan/bin/NAME (the sanitizers watch it), else build/bin/NAME."""
    p = os.environ.get(env)
    if p:
        return p if os.path.isabs(p) else os.path.join(ROOT, p)
    for cand in ("build/asan/bin/" + name, "build/bin/" + name):
        full = os.path.join(ROOT, cand)
        if os.access(full, os.X_OK):
            return full
    return os.path.join(ROOT, "build/bin/" + name)


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_PORTS = random.Random(os.getpid() ^ time.monotonic_ns())


def free_port():
    """A port nobody listens on now, for a server that must be told its port before it
    starts. Drawn below the kernel's ephemeral range, which every outgoing connection
    and every bind to port 0 takes its ports from, so that only another listener given
    the same number could take it between here and the server's bind; ServerProcess.start
    retries on a failed start all the same."""
    low = _ephemeral_low()
    if low > 20000:
        for _ in range(64):
            port = _PORTS.randrange(20000, low)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def task_states(pid):
    """The state letter of each thread of a process (/proc/PID/task/*/stat)."""
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                out.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:  # a thread that has just exited
            pass
    return out


def sigstop(pid, timeout=10):
    """Stops a process (SIGSTOP) and returns once every thread of it is stopped: kill()
    returns before the signal has taken hold, and a request sent meanwhile could still be
    answered."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while not all(s == "T" for s in task_states(pid)):
        assert time.monotonic() < deadline, "process %d did not stop" % pid
        time.sleep(0.001)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the test item: rep_setup, rep_call, rep_teardown."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def failed(node):
    """Did the test's setup or body fail (with pytest_runtest_makereport in force)?"""
    for when in ("setup", "call"):
        rep = getattr(node, "rep_" + when, None)
        if rep is not None and rep.failed:
            return True
    return False


class ServerProcess:
    """A server process on a free 127.0.0.1 port, stopped by PID.

    A subclass gives name, start_timeout, stop_timeout, and:
      argv()          the command line for self.port
      ping()          True once the server answers (exceptions count as not yet)
      output()        what the process wrote (its stderr, or its log file)
      spawn()         starts the process for self.port and returns the Popen
    """

    name = "server"
    start_timeout = 20.0
    stop_timeout = 15.0

    def __init__(self):
        self.proc = None
        self.port = None

    def start(self, port=None, expect_ready=True):
        """Starts on `port`, or a free one (then once more elsewhere if another process
        took it meanwhile), and waits for ping(); fails the test if it never answers."""
        for _ in range(3):
            self.port = port or free_port()
            self.proc = self.spawn()
            if not expect_ready or self.wait_ready():
                return self
            if self.proc.poll() is None:
                self.kill()
                pytest.fail("%s did not answer within %.0fs on port %d; output:\n%s"
                            % (self.name, self.start_timeout, self.port, self.output()))
            if port is not None or "in use" not in self.output().lower():
                break
        pytest.fail("%s exited during start-up (status %s); argv %s; output:\n%s"
                    % (self.name, self.proc.returncode, self.argv(), self.output()))

    def wait_ready(self):
        """True once ping() does; False if the process exited or start_timeout passed."""
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if self.ping():
                    return True
            except Exception:  # not listening yet, loading, ...
                pass
            time.sleep(0.02)
        return False

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def terminate(self):
        """SIGTERM by PID, SIGKILL after stop_timeout. Returns (status, killed)."""
        if self.proc is None:
            return None, False
        killed = False
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                killed = True
        return self.proc.returncode, killed

    def alive(self):
        return self.proc is not None and self.proc.poll() is None


class JsonLineDriver:
    """A test driver process (tests/backend/redis_driver, tests/client/resp_driver, ...)
    under the sanitizers: it reads request lines on stdin and prints one JSON line per
    answer. send() lines, answer() the next JSON line; finish() ends stdin and checks
    that the driver exited 0 with no sanitizer report."""

    def __init__(self, argv, ubsan="print_stacktrace=1", answer_timeout=20.0):
        self.argv = [str(a) for a in argv]
        self.name = os.path.basename(self.argv[0])
        self.answer_timeout = answer_timeout
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0",
                   UBSAN_OPTIONS=ubsan)
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.lines = queue.Queue()
        self.stderr = []
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()
        self.closed = False

    def _read_out(self):
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", "replace"))
        self.lines.put(None)

    def _read_err(self):
        for raw in self.proc.stderr:
            self.stderr.append(raw.decode("utf-8", "replace"))

    def send(self, *lines):
        """Writes the lines in one write, so that the driver reads them together."""
        self.proc.stdin.write(("".join(l + "\n" for l in lines)).encode())
        self.proc.stdin.flush()

    def answer(self, timeout=None):
        try:
            line = self.lines.get(timeout=self.answer_timeout if timeout is None else timeout)
        except queue.Empty:
            pytest.fail("%s printed nothing for %.0fs; stderr:\n%s"
                        % (self.name, self.answer_timeout if timeout is None else timeout,
                           "".join(self.stderr)))
        if line is None:
            pytest.fail("%s exited (status %s); stderr:\n%s"
                        % (self.name, self.proc.wait(), "".join(self.stderr)))
        return json.loads(line)

    def finish(self, timeout):
        """Ends stdin and waits up to `timeout` seconds for the driver to exit. Returns the
        JSON lines it printed after the last answer read, having checked that it exited 0
        with no sanitizer report; None when it was finished already."""
        if self.closed:
            return None
        self.closed = True
        self.proc.stdin.close()
        try:
            status = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("%s did not exit at the end of stdin" % self.name)
        rest = []
        while True:
            line = self.lines.get(timeout=10)
            if line is None:
                break
            rest.append(json.loads(line))
        err = "".join(self.stderr)
        assert status == 0, "%s exited %s; stderr:\n%s" % (self.name, status, err)
        for mark in SANITIZER_MARKS:
            assert mark not in err, err
        return rest
