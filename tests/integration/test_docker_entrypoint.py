"""The container's start-up (dist/docker/entrypoint.sh, the Dockerfile's ENTRYPOINT and
HEALTHCHECK), run here with a real sluiced: no Docker needed for what the script decides.

The script binds every address by default; here SLUICE_BIND=127.0.0.1 keeps the tests
on the loopback, and SLUICE_STATE_DIR a temporary directory stands for the volume.
"""

import os
import re
import signal
import subprocess

import pytest

from conftest import ROOT, SANITIZER_MARKS, binary, free_port
from harness import ServerProcess
from respclient import Conn, Error

ENTRYPOINT = os.path.join(ROOT, "dist", "docker", "entrypoint.sh")


class Container(ServerProcess):
    """sluiced started by the entrypoint with the environment a `docker run -e` gives."""

    name = "entrypoint"
    start_timeout = 20.0

    def __init__(self, tmp_path, env, args=()):
        super().__init__()
        self.tmp = tmp_path
        self.env = env
        self.args = list(args)
        self.log = str(tmp_path / "entrypoint.log")

    def argv(self):
        return [ENTRYPOINT] + self.args

    def environ(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
        env.update(SLUICED=binary("SLUICED", "sluiced"), SLUICE_BIND="127.0.0.1",
                   SLUICE_PORT=str(self.port), SLUICE_STATE_DIR=str(self.tmp))
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        env.update(self.env)
        return env

    def spawn(self):
        with open(self.log, "wb") as out:
            return subprocess.Popen(self.argv(), env=self.environ(), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=out)

    def ping(self):
        with Conn("127.0.0.1", self.port, timeout=2.0) as c:
            c.send_command("PING")
            return c.read_reply() is not None

    def output(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self):
        status, killed = self.terminate()
        out = self.output()
        assert not killed and status == 0, out
        for mark in SANITIZER_MARKS:
            assert mark not in out, out
        return out


@pytest.fixture
def container(tmp_path):
    started = []

    def make(env, args=(), ready=True):
        c = Container(tmp_path, env, args)
        started.append(c)
        return c.start(expect_ready=ready)

    yield make
    for c in started:
        if c.alive():
            c.kill()


def refused(tmp_path, env):
    """Runs the entrypoint to its end: it must refuse before any sluiced starts."""
    c = Container(tmp_path, env)
    c.port = free_port()
    p = subprocess.run(c.argv(), env=c.environ(), capture_output=True, text=True, timeout=30)
    return p.returncode, p.stderr


def reply(conn, *args):
    """The reply, an Error included (Conn.call raises it)."""
    conn.send_command(*args)
    return conn.read_reply()


def cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read().split(b"\0")


def test_no_password_no_server(tmp_path):
    status, err = refused(tmp_path, {})
    assert status == 2
    assert "SLUICE_PASSWORD" in err and "no password" in err


def test_config_without_requirepass_is_refused(tmp_path):
    conf = tmp_path / "sluiced.yaml"
    conf.write_text("server:\n  # requirepass: not-this\n  threads: 2\n")
    status, err = refused(tmp_path, {"SLUICE_CONFIG": str(conf)})
    assert status == 2 and "no password" in err


def test_unreadable_password_file(tmp_path):
    status, err = refused(tmp_path, {"SLUICE_PASSWORD_FILE": str(tmp_path / "missing")})
    assert status == 2 and "cannot be read" in err


def test_password_required_http_off_snapshot_in_volume(container, tmp_path):
    c = container({"SLUICE_PASSWORD": "s3cret pass"}, ["--threads", "2"])
    with Conn("127.0.0.1", c.port, timeout=5.0) as conn:
        r = reply(conn, "CL.THROTTLE", "k", 1, 1, 60)
        assert isinstance(r, Error) and r.code == "NOAUTH"
        assert conn.call("AUTH", "s3cret pass") == "OK"
        assert conn.call("CL.THROTTLE", "k", 1, 1, 60)[0] == 0
    argv = cmdline(c.proc.pid)
    assert argv[argv.index(b"--http-port") + 1] == b"0"  # HTTP has no password: off
    assert argv[argv.index(b"--threads") + 1] == b"2"    # flags given are passed on
    out = c.stop()
    assert "HTTP off" in out
    assert os.path.getsize(tmp_path / "snapshot") > 0


def test_password_file(container, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("from-a-file\n")
    c = container({"SLUICE_PASSWORD_FILE": str(secret)})
    with Conn("127.0.0.1", c.port, timeout=5.0) as conn:
        assert conn.call("AUTH", "from-a-file") == "OK"
    c.stop()


def test_password_in_config_stays_out_of_argv(container, tmp_path):
    conf = tmp_path / "sluiced.yaml"
    conf.write_text("server:\n  requirepass: in-the-file\n\npolicies:\n  api:\n"
                    "    limit: 10\n    period: 1m\n")
    http = free_port()
    c = container({"SLUICE_CONFIG": str(conf), "SLUICE_HTTP_PORT": str(http)})
    assert not any(b"in-the-file" in a for a in cmdline(c.proc.pid))
    with Conn("127.0.0.1", c.port, timeout=5.0) as conn:
        r = reply(conn, "SL.POLICY", "api", "u")
        assert isinstance(r, Error) and r.code == "NOAUTH"
        assert conn.call("AUTH", "in-the-file") == "OK"
        assert isinstance(conn.call("SL.POLICY", "api", "u"), list)
    p = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                        "http://127.0.0.1:%d/healthz" % http], capture_output=True, text=True,
                       timeout=30)
    assert p.stdout == "200"
    c.stop()


def test_other_command_runs_instead(tmp_path):
    p = subprocess.run([ENTRYPOINT, "echo", "hello"], capture_output=True, text=True, timeout=30,
                       env={"PATH": os.environ["PATH"]})
    assert p.returncode == 0 and p.stdout == "hello\n"


def healthcheck():
    """The Dockerfile's HEALTHCHECK command, as Docker runs it (/bin/sh -c)."""
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        text = f.read().replace("\\\n", " ")
    m = re.search(r"^HEALTHCHECK .*? CMD (.*)$", text, re.M)
    assert m, "no HEALTHCHECK in the Dockerfile"
    return m.group(1)


def test_healthcheck(container, tmp_path):
    c = container({"SLUICE_PASSWORD": "pw"})
    env = dict(os.environ, SLUICE_PORT=str(c.port))
    assert subprocess.run(["/bin/sh", "-c", healthcheck()], env=env, timeout=30).returncode == 0
    os.kill(c.proc.pid, signal.SIGTERM)
    c.stop()
    assert subprocess.run(["/bin/sh", "-c", healthcheck()], env=env, timeout=30,
                          stderr=subprocess.DEVNULL).returncode != 0
