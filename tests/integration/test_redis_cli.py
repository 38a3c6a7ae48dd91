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


def test_multi_exec_from_stdin(server, key):
    # redis-cli cannot send MULTI and EXEC on one command line; piped, each line is a
    # command on one connection. The EXEC reply's decisions print flat in RESP2.
    script = ("MULTI\nSL.TAKE {k} 2 60\nCL.THROTTLE {k}:c 1 1 60\nSL.TAKE {k} 2 60\n"
              "SL.TAKE {k} 2 60\nEXEC\nSL.PEEK {k} 2 60 COST 0\n").format(k=key)
    lines = cli(server, input=script.encode()).splitlines()
    assert lines[:5] == ["OK", "QUEUED", "QUEUED", "QUEUED", "QUEUED"], lines
    first, cell, second, third = lines[5:15], lines[15:20], lines[20:30], lines[30:40]
    assert first[:6] == ["allowed", "1", "limit", "2", "remaining", "1"], lines
    assert cell == ["0", "2", "1", "-1", "60"], lines
    assert second[:6] == ["allowed", "1", "limit", "2", "remaining", "0"], lines
    assert third[:2] == ["allowed", "0"], lines
    assert lines[40:46] == ["allowed", "1", "limit", "2", "remaining", "0"], \
        "the transaction's takes were consumed"


def test_multi_errors_from_stdin(server, key):
    script = ("EXEC\nDISCARD\nMULTI\nMULTI\nSL.TAKE {k}\nSL.TAKE {k} 2 60\nEXEC\n"
              "MULTI\nSL.TAKE {k} 2 60\nDISCARD\nSL.PEEK {k} 2 60 COST 0\n").format(k=key)
    lines = [l for l in cli(server, input=script.encode()).splitlines() if l]
    assert lines[:8] == [
        "ERR EXEC without MULTI",
        "ERR DISCARD without MULTI",
        "OK",
        "ERR MULTI calls can not be nested",
        "ERR wrong number of arguments for 'sl.take' command",
        "QUEUED",
        "EXECABORT Transaction discarded because of previous errors.",
        "OK",
    ], lines
    assert lines[8:10] == ["QUEUED", "OK"], lines
    assert lines[10:16] == ["allowed", "1", "limit", "2", "remaining", "2"], \
        "neither the aborted nor the discarded transaction took anything"


def test_multi_exec_resp3_from_stdin(server, key):
    out = cli(server, input=("MULTI\nSL.TAKE %s 5 60\nSL.TAKE %s 5 60\nEXEC\n" % (key, key)).encode(),
              resp=3)
    lines = out.splitlines()
    assert lines[:3] == ["OK", "QUEUED", "QUEUED"], lines
    # RESP3: each decision in EXEC's array is a map, printed as "field value" lines
    assert [l for l in lines if l.startswith("remaining ")] == ["remaining 4", "remaining 3"], out
