"""sd_notify: sluiced under a service manager (systemd's Type=notify, dist/systemd/).

Each test binds a unix datagram socket of its own, as systemd does, starts sluiced with
NOTIFY_SOCKET naming it, and reads what arrives: READY=1 once every listener is up (a
connection made right after it must succeed at once), RELOADING=1 and READY=1 around a
SIGHUP reload, STOPPING=1 at SIGTERM, each sent by sluiced's main process (the sender's
PID, from SO_PASSCRED, is the PID systemd would hold as MAINPID).
"""

import os
import shutil
import signal
import socket
import struct
import tempfile

import pytest

from respclient import Conn

CONFIG = """\
policies:
  api:
    limit: 10
    period: 1m
"""


class NotifySocket:
    """A unix datagram socket bound at a path, or at '@name' (the abstract namespace)."""

    def __init__(self, abstract=False):
        self.dir = tempfile.mkdtemp(prefix="sl-notify-")  # short: sun_path holds 108 bytes
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        if abstract:
            name = "sluice-test-%d-%s" % (os.getpid(), os.path.basename(self.dir))
            self.sock.bind("\0" + name)
            self.env = "@" + name
        else:
            self.env = os.path.join(self.dir, "notify")
            self.sock.bind(self.env)

    def recv(self, timeout=20.0):
        """The next datagram as (dict of its assignments, the sender's pid)."""
        self.sock.settimeout(timeout)
        size = struct.calcsize("iII")
        data, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(size))
        pid = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = struct.unpack("iII", payload[:size])[0]
        fields = dict(line.split("=", 1) for line in data.decode().split("\n") if line)
        return fields, pid

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def notify():
    n = NotifySocket()
    yield n
    n.close()


def launch(make_server, monkeypatch, notify_env, args=()):
    """sluiced with NOTIFY_SOCKET set, started without waiting for it to answer."""
    monkeypatch.setenv("NOTIFY_SOCKET", notify_env)
    s = make_server(args=list(args), start=False)
    s.launch()
    return s


def ping(port):
    with Conn("127.0.0.1", port, timeout=5.0) as c:
        c.send_command("PING")
        return c.read_reply()


def test_ready_after_listeners_then_stopping(make_server, monkeypatch, notify, tmp_path):
    from harness import free_port
    http_port = free_port()
    s = launch(make_server, monkeypatch, notify.env, ["--http-port", str(http_port)])
    fields, pid = notify.recv()
    assert fields == {"READY": "1"}
    assert pid == s.proc.pid
    # Ready means listening: both ports take a connection now, with no retry.
    assert ping(s.port) == "PONG"
    with socket.create_connection(("127.0.0.1", http_port), timeout=5) as h:
        h.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert h.recv(4096).startswith(b"HTTP/1.1 200")
    assert s.stop() == 0  # SIGTERM; exit 0, no sanitizer report
    fields, pid = notify.recv()
    assert fields == {"STOPPING": "1"}
    assert pid == s.proc.pid


def test_reload_is_bracketed(make_server, monkeypatch, notify, tmp_path):
    conf = tmp_path / "sluiced.yaml"
    conf.write_text(CONFIG)
    s = launch(make_server, monkeypatch, notify.env, ["--config", str(conf)])
    assert notify.recv()[0] == {"READY": "1"}
    conf.write_text(CONFIG.replace("limit: 10", "limit: 20"))
    os.kill(s.proc.pid, signal.SIGHUP)
    fields, pid = notify.recv()
    assert fields.get("RELOADING") == "1" and pid == s.proc.pid
    # For Type=notify-reload: the monotonic clock in microseconds, not zero.
    assert int(fields["MONOTONIC_USEC"]) > 0 and set(fields) == {"RELOADING", "MONOTONIC_USEC"}
    assert notify.recv()[0] == {"READY": "1"}
    with Conn("127.0.0.1", s.port, timeout=5.0) as c:
        r = c.call("SL.POLICY", "api", "u1")
    assert 20 in list(r), r  # the reloaded limit is in force
    # A refused config ends its reload all the same, and the old policies stay.
    conf.write_text("policies: [\n")
    os.kill(s.proc.pid, signal.SIGHUP)
    assert notify.recv()[0].get("RELOADING") == "1"
    assert notify.recv()[0] == {"READY": "1"}
    assert s.stop() == 0
    assert notify.recv()[0] == {"STOPPING": "1"}


def test_abstract_socket(make_server, monkeypatch):
    n = NotifySocket(abstract=True)
    try:
        s = launch(make_server, monkeypatch, n.env)
        assert n.recv()[0] == {"READY": "1"}
        assert s.stop() == 0
        assert n.recv()[0] == {"STOPPING": "1"}
    finally:
        n.close()


@pytest.mark.parametrize("value", ["relative/notify", "/nonexistent-dir/notify", "@" + "x" * 200])
def test_unusable_socket_does_not_stop_serving(make_server, monkeypatch, value):
    """A NOTIFY_SOCKET that cannot be used is logged; sluiced serves and stops as usual."""
    monkeypatch.setenv("NOTIFY_SOCKET", value)
    s = make_server()
    assert ping(s.port) == "PONG"
    assert s.stop() == 0
    assert "NOTIFY_SOCKET" in s.stderr()


def test_no_socket_no_notification(make_server, monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    s = make_server()
    assert ping(s.port) == "PONG"
    assert s.stop() == 0
    assert "NOTIFY_SOCKET" not in s.stderr()
