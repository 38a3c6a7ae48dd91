"""Shutdown: SIGTERM finishes what is in flight, but neither a client that never reads the
replies it is owed nor clients that keep pipelining can hold the server: it exits 0 within
the grace period (5 s), with its snapshot written."""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

GRACE = 5.0


def test_a_client_that_never_reads_cannot_hold_shutdown(make_server):
    srv = make_server()
    s = socket.create_connection(srv.addr, timeout=5)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    cmd = b"*2\r\n$4\r\nECHO\r\n$1000\r\n" + b"x" * 1000 + b"\r\n"
    stop = threading.Event()

    def pump():  # 20 MB of replies owed, well under the output limit, none of them read
        try:
            for _ in range(400):
                if stop.is_set():
                    break
                s.sendall(cmd * 50)
        except OSError:
            pass

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    time.sleep(1.0)
    with srv.conn() as other:  # the server still serves everyone else meanwhile
        assert other.call("PING") == "PONG"
    started = time.monotonic()
    assert srv.stop() == 0
    took = time.monotonic() - started
    stop.set()
    s.close()
    assert took < 12, "shutdown took %.1fs" % took
    assert "still owed replies at shutdown" in srv.stderr()


def test_replies_in_flight_are_delivered_before_exit(make_server):
    srv = make_server()
    with srv.conn() as c:
        c.sock.sendall(b"".join(b"*2\r\n$4\r\nECHO\r\n$%d\r\n%d\r\n" % (len(str(i)), i)
                                for i in range(2000)))
        srv.proc.send_signal(15)
        got = [c.read_reply() for _ in range(2000)]
    assert [int(x) for x in got] == list(range(2000))
    assert srv.stop() == 0


def test_shutdown_begins_alike_from_the_tick_or_the_wake_up(make_server, monkeypatch):
    """A worker learns of SIGTERM from its wake-up or from its once-a-second tick,
    whichever runs first. The tick used to only finish a shutdown the wake-up had begun,
    leaving the listeners open: the loop then never ended. The hook holds the wake-up
    back 1.5 s, so that every worker's tick sees the flag first."""
    monkeypatch.setenv("SLUICED_DEBUG_STOP_DELAY_MS", "1500")
    s = make_server()
    with s.conn() as c:
        assert c.call("PING") == "PONG"
    t0 = time.monotonic()
    assert s.stop() == 0
    assert time.monotonic() - t0 < 10


# A client's two halves, each in a process of its own so that it runs as fast as the
# kernel lets it (Python threads of one process would take turns): the writer sends the
# same commands again and again on the socket it is given, the reader takes and drops the
# replies, until it is killed or the socket breaks.
WRITER = r"""
import socket, sys
s = socket.socket(fileno=int(sys.argv[1]))
cmd = b"*5\r\n$11\r\nCL.THROTTLE\r\n$4\r\nbusy\r\n$3\r\n100\r\n$2\r\n10\r\n$2\r\n60\r\n"
batch = cmd * 20000
try:
    while True:
        s.sendall(batch)
except OSError:
    pass
"""
READER = r"""
import socket, sys
s = socket.socket(fileno=int(sys.argv[1]))
buf = bytearray(1 << 20)
try:
    while s.recv_into(buf):
        pass
except OSError:
    pass
"""


def _commands_processed(srv):
    with srv.conn() as c:
        info = c.call("INFO").decode()
    return int(info.split("total_commands_processed:")[1].split()[0])


def test_clients_that_keep_pipelining_cannot_hold_shutdown(make_server, tmp_path):
    """Two clients send commands without pause and read their replies as they come. The
    drain at shutdown serves only what each had sent before SIGTERM: it used to read for as
    long as their sockets held data, past the grace period, and a service manager's SIGKILL
    would then lose the snapshot."""
    snap = str(tmp_path / "shutdown.snapshot")
    srv = make_server(["--snapshot", snap, "--snapshot-interval", "0"])
    socks = [socket.create_connection(srv.addr, timeout=30) for _ in range(2)]
    for s in socks:
        s.setblocking(True)  # the halves block on it: no timeout's O_NONBLOCK
    clients = [subprocess.Popen([sys.executable, "-c", half, str(s.fileno())],
                                pass_fds=(s.fileno(),)) for s in socks for half in (WRITER, READER)]
    try:
        deadline = time.monotonic() + 60
        while _commands_processed(srv) < 200000 and time.monotonic() < deadline:  # both busy
            time.sleep(0.1)
        started = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        try:
            status = srv.proc.wait(timeout=GRACE + 10)
        except subprocess.TimeoutExpired:
            status = None
        took = time.monotonic() - started
    finally:
        for p in clients:
            p.kill()
            p.wait(timeout=10)
        for s in socks:
            s.close()
    assert status is not None, "sluiced had not exited %.0f s after SIGTERM" % (GRACE + 10)
    assert status == 0, srv.stderr()
    assert os.path.getsize(snap) > 0, "no snapshot at shutdown"
    assert "snapshot written to %s (shutdown)" % snap in srv.stderr()
    assert srv.stop() == 0, "took %.1f s" % took  # and the sanitizer checks
