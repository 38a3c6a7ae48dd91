"""`sluice bench` and `sluice take` against Redis with the sluice module (a real
redis-server with --loadmodule build/lib/sluice-redis.so on a free 127.0.0.1 port,
stopped by its PID). Skipped when redis-server or the module is not there."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from conftest import ROOT, free_port, run
from test_bench import result
from test_take import cell

MODULE = os.path.join(ROOT, os.environ.get("SLUICE_MODULE", "build/lib/sluice-redis.so"))


@pytest.fixture(scope="module")
def redis_addr():
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed")
    if not os.path.exists(MODULE):
        pytest.skip("the module is not built: %s" % MODULE)
    d = tempfile.mkdtemp(prefix="sluice-cli-redis-")
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
         "--appendonly", "no", "--daemonize", "no", "--logfile", os.path.join(d, "redis.log"),
         "--loadmodule", MODULE], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT, cwd=d)
    deadline = time.monotonic() + 20
    ready = False
    while time.monotonic() < deadline and proc.poll() is None and not ready:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                ready = s.recv(16).startswith(b"+PONG")
        except OSError:
            time.sleep(0.02)
    if not ready:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        pytest.fail("redis-server with the module did not start")
    yield "127.0.0.1:%d" % port
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    shutil.rmtree(d, ignore_errors=True)


def test_bench_cl_throttle_against_the_module(redis_addr):
    p = run("bench", "--server", redis_addr, "--command", "cl.throttle", "--keys", 1,
            "--prefix", "m:cl:", "--limit", 5, "--period", "1h", "--duration", 1,
            "--connections", 2, "--pipeline", 4, check=0)
    r = result(p.stdout)
    assert r["errors"] == 0 and r["allowed"] == 5 and r["requests"] > 5


def test_bench_sl_take_against_the_module(redis_addr):
    p = run("bench", "--server", redis_addr, "--keys", 4, "--prefix", "m:sl:", "--limit", 3,
            "--period", "1h", "--algorithm", "fixed_window", "--duration", 1, check=0)
    r = result(p.stdout)
    assert r["errors"] == 0 and r["allowed"] == 12


def test_take_against_the_module(redis_addr):
    p = run("take", "--server", redis_addr, "user123", "--command", "cl.throttle", "--burst", 16,
            "--limit", 30, "--period", 60, check=0)
    assert cell(p.stdout) == [0, 16, 15, -1, 2]
    p = run("take", "--server", redis_addr, "m:take", "--limit", 2, "--period", "1m",
            "--algorithm", "sliding_log", "--repeat", 3, check=0)
    lines = [l for l in p.stdout.splitlines() if l.startswith("take ")]
    assert [l.split()[2] for l in lines] == ["allowed", "allowed", "rejected"]


def test_bench_lua_script(redis_addr):
    # Redis + Lua, the alternative a user would pick: CL.THROTTLE's arithmetic in the
    # central store's script, called with SL.DECIDE's arguments.
    script = os.path.join(ROOT, "src", "backend", "lua", "sluice.lua")
    p = run("bench", "--server", redis_addr, "--command", "cl.throttle", "--lua", script,
            "--keys", 1, "--prefix", "m:lua:", "--limit", 5, "--period", "1h", "--duration", 1,
            "--connections", 2, "--pipeline", 4, check=0)
    r = result(p.stdout)
    assert r["command"] == "EVALSHA"
    assert r["errors"] == 0 and r["allowed"] == 5 and r["requests"] > 5


def test_bench_lua_errors(redis_addr, tmp_path):
    bad = tmp_path / "bad.lua"
    bad.write_text("this is not lua (")
    p = run("bench", "--server", redis_addr, "--command", "cl.throttle", "--lua", bad,
            "--duration", 1, check=1)
    assert "SCRIPT LOAD" in p.stderr and "ERR" in p.stderr
    p = run("bench", "--server", redis_addr, "--lua", bad, check=2)
    assert "--lua" in p.stderr
    p = run("bench", "--server", redis_addr, "--command", "cl.throttle", "--lua",
            tmp_path / "missing.lua", check=1)
    assert "missing.lua" in p.stderr
