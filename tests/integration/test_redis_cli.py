"""redis-cli (Debian's redis-tools 7.0) as a real client: one-shot commands in RESP2 and
RESP3 (--json shows the RESP3 types), and commands read from stdin (its repl, which asks
COMMAND DOCS first)."""

import json

from respclient import as_map


def cli(server, *args, resp=None, input=None):
    out = server.redis_cli(*args, resp=resp, input=input)
    assert out.returncode == 0, out
    return out.stdout.decode()


def test_one_shot_cl_throttle(server, key):
    assert cli(server, "CL.THROTTLE", key, 15, 30, 60, 1) == "0\n16\n15\n-1\n2\n"
    assert cli(server, "cl.throttle", key, 15, 30, 60) == "0\n16\n14\n-1\n4\n"


def test_one_shot_ping_echo(server):
    assert cli(server, "PING") == "PONG\n"
    assert cli(server, "ECHO", "hello world") == "hello world\n"


def test_one_shot_take_resp2_json(server, key):
    got = json.loads(cli(server, "--json", "SL.TAKE", key, 100, 60, resp=2))
    assert isinstance(got, list), "RESP2: a flat array"
    assert as_map(got) == {"allowed": 1, "limit": 100, "remaining": 99, "retry_after_ms": 0, "reset_after_ms": 600}


def test_one_shot_take_resp3_json(server, key):
    got = json.loads(cli(server, "--json", "SL.TAKE", key, 100, 60, resp=3))
    assert got == {"allowed": 1, "limit": 100, "remaining": 99, "retry_after_ms": 0, "reset_after_ms": 600}, \
        "RESP3: a map"


def test_one_shot_takemany_resp3_json(server, key):
    got = json.loads(cli(server, "--json", "SL.TAKEMANY", 2, key + ":a", key + ":b",
                         "LIMIT", 10, 60, "LIMIT", 5, 60, resp=3))
    assert got["allowed"] == 1 and got["rejected_by"] == -1
    assert [r["remaining"] for r in got["results"]] == [9, 4]


def test_one_shot_acquire_null_resp3(server, key):
    lease = cli(server, "SL.ACQUIRE", key, 1, 60000, resp=3).strip()
    assert lease
    assert json.loads(cli(server, "--json", "SL.ACQUIRE", key, 1, 60000, resp=3)) is None
    assert cli(server, "SL.RELEASE", key, lease, resp=3) == "1\n"


def test_one_shot_error(server):
    out = server.redis_cli("CL.THROTTLE", "k")
    # redis-cli prints errors on stdout and (7.0) exits 0 in one-shot mode
    assert b"ERR wrong number of arguments for 'cl.throttle' command" in out.stdout + out.stderr


def test_commands_from_stdin(server, key):
    # redis-cli reading commands from a pipe: asks COMMAND DOCS (for its hints) on start,
    # then runs each line
    script = "PING\nCL.THROTTLE %s 15 30 60\nECHO \"two words\"\nSL.TAKE %s 5 60\n" % (key, key + ":t")
    out = cli(server, input=script.encode())
    lines = out.splitlines()
    assert lines[:7] == ["PONG", "0", "16", "15", "-1", "2", "two words"], lines
    assert lines[7:9] == ["allowed", "1"], lines


def test_stdin_resp3(server, key):
    out = cli(server, input=("HELLO 3\nSL.TAKE %s 5 60\n" % key).encode(), resp=3)
    # redis-cli prints a RESP3 map as "field value" lines (a RESP2 array would be one
    # value per line)
    lines = out.splitlines()
    assert "proto 3" in lines, out
    assert "allowed 1" in lines and "remaining 4" in lines, out


def test_hello_via_cli(server):
    got = json.loads(cli(server, "--json", "HELLO", "3", resp=3))
    assert got["proto"] == 3 and "server" in got and "version" in got


def test_info_via_cli(server):
    out = cli(server, "INFO")
    assert "# Server" in out or "# server" in out.lower()
