"""Forward-auth by the client's address (docs/http.md, "The client's address"): with
--http-auth-header X-Forwarded-For, Forwarded or X-Real-IP the key is the socket's peer unless
the peer is a trusted proxy (--trusted-proxies, loopback by default), else the right-most
address of the header that is not a trusted proxy's. A client that forges entries of its own
changes nothing: they are left of the address its proxy appended.

Every test runs a real sluiced with a per-IP policy of 2 per hour, and asks it over
http.client, which sends header fields exactly as given (repeated ones included) and can
connect from another loopback address (127.0.0.2) than 127.0.0.1."""

import http.client
import json
import signal
import time

import pytest

from conftest import free_port

POLICY = "policies:\n  ip: {limit: 2, period: 1h}\n"


def start(make_server, tmp_path, header, *args, conf=None):
    path = tmp_path / "sluice.yaml"
    path.write_text(conf if conf is not None else POLICY)
    port = free_port()
    s = make_server(args=["--http-port", str(port), "--http-auth-header", header,
                          "--http-deny-status", "403", "--config", str(path)] + list(args))
    s.http = port
    s.conf = path
    return s


def ask(s, headers=(), source="127.0.0.1", path="/v1/auth/ip"):
    """GET path with these (name, value) fields; returns (status, json body, headers)."""
    c = http.client.HTTPConnection("127.0.0.1", s.http, timeout=5, source_address=(source, 0))
    try:
        c.putrequest("GET", path)
        for name, value in headers:
            c.putheader(name, value)
        c.endheaders()
        r = c.getresponse()
        body = r.read()
        return r.status, json.loads(body) if body else None, r
    finally:
        c.close()


def keyed(s, key):
    """Whether the store holds a state for the policy's key of this address."""
    status, _, _ = ask(s, path="/v1/keys/ip:" + key)
    assert status in (200, 404)
    return status == 200


def used_up(s, headers=(), source="127.0.0.1"):
    """Two admitted, the third refused: the same key all three times."""
    assert ask(s, headers, source)[0] == 200
    assert ask(s, headers, source)[0] == 200
    status, body, _ = ask(s, headers, source)
    assert status == 403, body


def test_a_forged_left_most_x_forwarded_for_changes_nothing(make_server, tmp_path):
    s = start(make_server, tmp_path, "X-Forwarded-For")
    # the proxy (127.0.0.1, trusted by default) appended 203.0.113.7; the client wrote the rest
    for forged in ("1.1.1.1", "2.2.2.2, 3.3.3.3", "garbage", "127.0.0.1"):
        status, body, _ = ask(s, [("X-Forwarded-For", forged + ", 203.0.113.7")])
        if forged in ("1.1.1.1", "2.2.2.2, 3.3.3.3"):
            assert status == 200, body
        else:
            assert status == 403, body  # the third and fourth: the key is used up
    assert keyed(s, "203.0.113.7")
    for forged in ("1.1.1.1", "2.2.2.2", "3.3.3.3", "garbage"):
        assert not keyed(s, forged), forged
    # a trusted proxy's own entry (127.0.0.1) is skipped: the client is left of it
    status, _, _ = ask(s, [("X-Forwarded-For", "9.9.9.9, 198.51.100.4, 127.0.0.1")])
    assert status == 200 and keyed(s, "198.51.100.4") and not keyed(s, "9.9.9.9")
    # several fields are one list, in order; a port is no part of the address
    used_up(s, [("X-Forwarded-For", "8.8.8.8"), ("X-Forwarded-For", "198.51.100.5:4711")])
    assert keyed(s, "198.51.100.5") and not keyed(s, "8.8.8.8")
    # without the header, the trusted peer is the client itself: its address, no 401
    status, body, _ = ask(s)
    assert status == 200, body
    assert keyed(s, "127.0.0.1")


def test_forwarded_with_quoted_ipv6_and_ports(make_server, tmp_path):
    s = start(make_server, tmp_path, "forwarded")  # the name in any case
    used_up(s, [("Forwarded", 'for=1.1.1.1, for="[2001:db8::1]:4711";proto=https')])
    assert keyed(s, "2001:db8::1") and not keyed(s, "1.1.1.1")
    used_up(s, [("Forwarded", 'for=6.6.6.6;by=x, For="203.0.113.9:80", for=127.0.0.1')])
    assert keyed(s, "203.0.113.9") and not keyed(s, "6.6.6.6")
    # unknown and obfuscated nodes are no address: the nearest address right of them is the
    # client (here the trusted proxy itself), or there is nothing to key by
    status, body, _ = ask(s, [("Forwarded", "for=unknown, for=127.0.0.5")])
    assert status == 200 and keyed(s, "127.0.0.5"), body
    status, body, _ = ask(s, [("Forwarded", "for=5.5.5.5, for=_hidden")])
    assert status == 400 and body["field"] == "forwarded", body
    assert "unknown or obfuscated" in body["error"] and not keyed(s, "5.5.5.5")


def test_x_real_ip_from_a_trusted_proxy(make_server, tmp_path):
    s = start(make_server, tmp_path, "X-Real-IP")
    used_up(s, [("X-Real-IP", "203.0.113.20")])
    assert keyed(s, "203.0.113.20")
    status, body, _ = ask(s, [("X-Real-IP", "1.1.1.1"), ("X-Real-IP", "2.2.2.2")])
    assert status == 400 and "more than once" in body["error"], body


@pytest.mark.parametrize("trusted", ["none", "10.0.0.0/8,::1"])
def test_an_untrusted_peer_is_the_client_whatever_it_writes(make_server, tmp_path, trusted):
    for header in ("X-Forwarded-For", "Forwarded", "X-Real-IP"):
        s = start(make_server, tmp_path, header, "--trusted-proxies", trusted)
        forged = {"X-Forwarded-For": "1.2.3.4", "Forwarded": "for=1.2.3.4",
                  "X-Real-IP": "1.2.3.4"}[header]
        assert ask(s, [(header, forged)])[0] == 200
        assert ask(s, [(header, "5.6.7.8")])[0] == 200
        assert ask(s, [(header, "not an address")])[0] == 403, "not even read"
        assert keyed(s, "127.0.0.1") and not keyed(s, "1.2.3.4") and not keyed(s, "5.6.7.8")
        s.stop()


def test_only_the_trusted_address_is_believed(make_server, tmp_path):
    # 127.0.0.2 is the proxy; a client connecting from 127.0.0.1 is not believed
    s = start(make_server, tmp_path, "X-Forwarded-For", "--trusted-proxies", "127.0.0.2/32")
    assert ask(s, [("X-Forwarded-For", "203.0.113.30")], source="127.0.0.2")[0] == 200
    assert keyed(s, "203.0.113.30")
    assert ask(s, [("X-Forwarded-For", "203.0.113.31")], source="127.0.0.1")[0] == 200
    assert keyed(s, "127.0.0.1") and not keyed(s, "203.0.113.31")


@pytest.mark.parametrize("header,value", [
    ("X-Forwarded-For", "203.0.113.7, garbage"),
    ("X-Forwarded-For", "203.0.113.7,"),
    ("X-Forwarded-For", "203.0.113.7:99999"),
    ("X-Forwarded-For", "unknown"),
    ("Forwarded", "for=203.0.113.7;for=1.1.1.1"),
    ("Forwarded", 'for="[2001:db8::1]:4711'),
    ("Forwarded", "for=[2001:db8::1"),
    ("X-Real-IP", "203.0.113.7, 1.1.1.1"),
])
def test_malformed_headers_get_400_naming_the_header(make_server, tmp_path, header, value):
    s = start(make_server, tmp_path, header)
    status, body, _ = ask(s, [(header, value)])
    assert status == 400, body
    assert body["field"] == header and body["error"].startswith(header), body
    s.assert_serving()


def test_more_than_64_entries_are_refused(make_server, tmp_path):
    s = start(make_server, tmp_path, "X-Forwarded-For")
    many = ", ".join("10.0.%d.%d" % (i // 250, i % 250) for i in range(64))
    assert ask(s, [("X-Forwarded-For", many)])[0] == 200
    assert keyed(s, "10.0.0.63")
    status, body, _ = ask(s, [("X-Forwarded-For", many + ", 203.0.113.1")])
    assert status == 400 and "more than 64 addresses" in body["error"], body
    # the count is of every field together
    status, body, _ = ask(s, [("X-Forwarded-For", many), ("X-Forwarded-For", "203.0.113.1")])
    assert status == 400 and "more than 64 addresses" in body["error"], body
    s.assert_serving()


def test_bad_flag_values_are_refused(make_server, tmp_path):
    for bad, why in (("10.0.0.0/33", "0 to 32"), ("", "empty entry"), ("nginx", "not an IPv4"),
                     (",".join("10.0.%d.0/24" % i for i in range(65)), "more than 64 ranges")):
        s = make_server(args=["--trusted-proxies", bad], start=False)
        s.launch()
        s.proc.wait(timeout=20)
        assert s.proc.returncode == 2
        assert "invalid value" in s.stderr() and why in s.stderr(), s.stderr()


def test_the_config_file_setting(make_server, tmp_path):
    conf = "server:\n  trusted_proxies: 127.0.0.2\n" + POLICY
    s = start(make_server, tmp_path, "X-Forwarded-For", conf=conf)
    assert ask(s, [("X-Forwarded-For", "203.0.113.40")], source="127.0.0.2")[0] == 200
    assert ask(s, [("X-Forwarded-For", "203.0.113.41")], source="127.0.0.1")[0] == 200
    assert keyed(s, "203.0.113.40") and keyed(s, "127.0.0.1") and not keyed(s, "203.0.113.41")
    # As the other HTTP settings, it is read at start: a SIGHUP says it waits for a restart.
    s.conf.write_text("server:\n  trusted_proxies: none\n" + POLICY)
    deadline = time.monotonic() + 20
    while "take effect at the next start" not in s.stderr():
        assert time.monotonic() < deadline, s.stderr()
        s.proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)
    assert "trusted-proxies changed" in s.stderr(), s.stderr()
    assert ask(s, [("X-Forwarded-For", "203.0.113.42")], source="127.0.0.2")[0] == 200
    assert keyed(s, "203.0.113.42"), "the start's setting holds"
    # and a flag wins over the file
    s.stop()
    s2 = start(make_server, tmp_path, "X-Forwarded-For", "--trusted-proxies", "none", conf=conf)
    assert ask(s2, [("X-Forwarded-For", "203.0.113.43")], source="127.0.0.2")[0] == 200
    assert keyed(s2, "127.0.0.2") and not keyed(s2, "203.0.113.43")
