"""Key templates (docs/configuration.md, "Key templates"): a policy's key: keys forward-auth
(/v1/auth/{policy}) by what the request carries: a header, the query, the method, the path,
the client's address, side by side. A request that lacks a part is refused with 401 naming it,
or keyed by the policy's key_fallback:. The original method and path come from Envoy's path
suffix, or from X-Forwarded-* / X-Original-* written by a trusted proxy only. Over RESP and
/v1/check, the key of such a policy is the store key in full, so that forward-auth and SL.POLICY
meet on one state. Templates of {key}, {policy} and text write the store keys they always
wrote; a single brace is refused, at start and on SIGHUP, with the spelling that writes them.

Every test runs a real sluiced and asks it over http.client, which sends header fields as given
and can connect from another loopback address (127.0.0.2) than 127.0.0.1."""

import http.client
import json
import os
import signal
import time
import urllib.parse

import pytest

from conftest import free_port
from redis_server import RedisServer
from respclient import Error, as_map


def start(make_server, tmp_path, conf, *args):
    path = tmp_path / "sluice.yaml"
    path.write_text(conf)
    port = free_port()
    s = make_server(args=["--http-port", str(port), "--config", str(path)] + list(args))
    s.http = port
    s.conf = path
    return s


def ask(s, path, headers=(), source="127.0.0.1", method="GET"):
    """path with these (name, value) fields; returns (status, json body)."""
    c = http.client.HTTPConnection("127.0.0.1", s.http, timeout=5, source_address=(source, 0))
    try:
        c.putrequest(method, path, skip_accept_encoding=True)
        for name, value in headers:
            c.putheader(name, value)
        c.endheaders()
        r = c.getresponse()
        body = r.read()
        return r.status, json.loads(body) if body else None
    finally:
        c.close()


def stored(s):
    """has(key): whether the server holds a state under this exact store key (SL.INSPECT)."""
    def has(key):
        with s.conn() as c:
            return c.call("SL.INSPECT", key) is not None
    return has


def policy(name, key, fallback=None, limit=2):
    text = "  %s:\n    limit: %d\n    period: 1h\n    key: '%s'\n" % (name, limit, key)
    if fallback is not None:
        text += "    key_fallback: '%s'\n" % fallback
    return text


def test_each_part_of_the_request_keys_the_policy(make_server, tmp_path):
    conf = "policies:\n" + "".join([
        policy("hdr", "{policy}:{header.X-Tenant}"),
        policy("qry", "q:{query.user}"),
        policy("meth", "{policy}:{method}"),
        policy("path", "p:{path}"),
        policy("seg", "s:{path/2}"),
        policy("ip", "ip:{ip}"),
        policy("net", "net:{ip/24}"),
        policy("net6", "net6:{ip6/48}"),
        policy("combo", "{header.x-api-key}:{method}"),
    ])
    s = start(make_server, tmp_path, conf)
    has = stored(s)
    # a header, any case, its value without the blanks around it
    assert ask(s, "/v1/auth/hdr", [("x-tenant", "  acme ")])[0] == 200
    assert has("hdr:acme") and not has("hdr:  acme ")
    # the query and the path of the client's request, as Envoy sends them after the policy
    assert ask(s, "/v1/auth/qry/orders?page=2&user=bob%20x")[0] == 200
    assert has("q:bob x")
    assert ask(s, "/v1/auth/path/v1/orders/123?x=1")[0] == 200
    assert has("p:/v1/orders/123")
    assert ask(s, "/v1/auth/seg/v1//orders/123")[0] == 200
    assert has("s:/v1/orders")
    # the method, as sent
    for method in ("DELETE", "DELETE", "DELETE"):
        status, body = ask(s, "/v1/auth/meth", method=method)
    assert status == 429 and body["remaining"] == 0, body
    assert has("meth:DELETE") and ask(s, "/v1/auth/meth", method="PUT")[0] == 200
    # the client's address: a trusted peer (loopback, the default) without X-Forwarded-For is
    # the client itself, else the right-most address it did not write
    assert ask(s, "/v1/auth/ip", source="127.0.0.2")[0] == 200
    assert has("ip:127.0.0.2")
    assert ask(s, "/v1/auth/ip", [("X-Forwarded-For", "1.1.1.1, 203.0.113.7")])[0] == 200
    assert has("ip:203.0.113.7") and not has("ip:1.1.1.1")
    assert ask(s, "/v1/auth/net", [("X-Forwarded-For", "203.0.113.7")])[0] == 200
    assert ask(s, "/v1/auth/net", [("X-Forwarded-For", "203.0.113.99")])[0] == 200
    status, _ = ask(s, "/v1/auth/net", [("X-Forwarded-For", "203.0.113.200")])
    assert status == 429 and has("net:203.0.113.0/24"), "one /24, one budget"
    assert ask(s, "/v1/auth/ip", [("X-Forwarded-For", "2001:db8:1:2:3:4:5:6")])[0] == 200
    assert has("ip:2001:db8:1:2::/64"), "an IPv6 client is its /64"
    assert ask(s, "/v1/auth/net6", [("X-Forwarded-For", "2001:db8:1:2:3:4:5:6")])[0] == 200
    assert has("net6:2001:db8:1::/48")
    assert ask(s, "/v1/auth/net6", [("X-Forwarded-For", "198.51.100.4")])[0] == 200
    assert has("net6:198.51.100.4"), "an IPv4 client whole"
    # parts side by side
    assert ask(s, "/v1/auth/combo", [("X-Api-Key", "abc")], method="POST")[0] == 200
    assert has("abc:POST") and not has("abc:GET")
    # an address header that cannot be read is a 400 naming it, for a template of {ip}
    status, body = ask(s, "/v1/auth/ip", [("X-Forwarded-For", "garbage")])
    assert status == 400 and body["field"] == "X-Forwarded-For", body


def test_a_missing_part_is_401_naming_it_or_the_fallback(make_server, tmp_path):
    conf = "policies:\n" + "".join([
        policy("strict", "{policy}:{header.x-api-key}"),
        policy("fb", "{policy}:{header.x-api-key}", "{policy}:ip:{ip}"),
        policy("both", "{header.a}", "{query.b}"),
        policy("anon", "{policy}:{key}", "{policy}:anonymous"),
    ])
    s = start(make_server, tmp_path, conf)
    has = stored(s)
    status, body = ask(s, "/v1/auth/strict")
    assert status == 401, body
    assert body == {"error": "missing header.x-api-key, which policy 'strict' keys by",
                    "field": "header.x-api-key"}
    assert ask(s, "/v1/auth/strict", [("X-Api-Key", " \t")])[0] == 401, "only blanks: missing"
    # the fallback keys a request without the header; one with it is keyed by it
    assert ask(s, "/v1/auth/fb")[0] == 200
    assert has("fb:ip:127.0.0.1") and not has("fb:")
    assert ask(s, "/v1/auth/fb", [("X-Api-Key", "abc")])[0] == 200
    assert has("fb:abc")
    status, body = ask(s, "/v1/auth/both")
    assert status == 401 and body["field"] == "header.a", body
    assert "and query.b, which its key_fallback does" in body["error"], body
    # {key} is the key header: without it, every such request shares the fallback's key
    assert ask(s, "/v1/auth/anon", [("X-Api-Key", "alice")])[0] == 200
    assert ask(s, "/v1/auth/anon")[0] == 200
    assert ask(s, "/v1/auth/anon")[0] == 200
    assert ask(s, "/v1/auth/anon")[0] == 429
    assert has("anon:alice") and has("anon:anonymous")


def test_forged_original_method_and_path_from_an_untrusted_peer_are_ignored(make_server,
                                                                           tmp_path):
    conf = "policies:\n" + policy("mp", "{method} {path} {query.id}", limit=100)
    forged = [("X-Forwarded-Method", "POST"), ("X-Forwarded-Uri", "/admin?id=7"),
              ("X-Original-Method", "PUT"), ("X-Original-URI", "/other?id=8")]
    s = start(make_server, tmp_path, conf, "--trusted-proxies", "127.0.0.1")
    has = stored(s)
    # from 127.0.0.2, not trusted: the request's own method, path and query
    assert ask(s, "/v1/auth/mp?id=1", forged, source="127.0.0.2")[0] == 400, \
        "its own query: id is no parameter of forward-auth's"
    assert ask(s, "/v1/auth/mp/orders?id=1", forged, source="127.0.0.2")[0] == 200
    assert has("GET /orders 1"), "Envoy's suffix is the request's own"
    assert not has("POST /admin 7")
    # from the trusted proxy: Traefik's X-Forwarded-*, before nginx's X-Original-*
    assert ask(s, "/v1/auth/mp", forged)[0] == 200
    assert has("POST /admin 7")
    assert ask(s, "/v1/auth/mp", forged[2:])[0] == 200
    assert has("PUT /other 8")
    # an empty field is none (nginx's proxy_set_header X-Forwarded-Uri "" removes it)
    assert ask(s, "/v1/auth/mp", [("X-Forwarded-Uri", ""), ("X-Original-URI", "/o?id=9")],
               method="PATCH")[0] == 200
    assert has("PATCH /o 9"), "without a method field, the request's own"


def test_resp_and_forward_auth_meet_on_one_store_key(make_server, tmp_path):
    conf = "policies:\n" + policy("api", "{policy}:{header.x-api-key}:{method}", limit=3)
    s = start(make_server, tmp_path, conf)
    assert ask(s, "/v1/auth/api", [("X-Api-Key", "abc")])[0] == 200
    with s.conn() as c:
        d = as_map(c.call("SL.POLICY", "api", "api:abc:GET"))
        assert (d["allowed"], d["remaining"]) == (1, 1), d
        # the key of {key} alone is no key this template writes
        with pytest.raises(Error) as e:
            c.call("SL.POLICY", "api", "abc")
        assert str(e.value) == ("ERR policy 'api' keys by the request: name the store key in "
                                "full, as forward-auth writes it: api:<header.x-api-key>:<method>")
        with pytest.raises(Error):
            c.call("SL.USAGE", "abc", "POLICY", "api")
    q = urllib.parse.urlencode({"policy": "api", "key": "api:abc:GET"})
    status, body = ask(s, "/v1/check?" + q)
    assert status == 200 and body["remaining"] == 0, body
    status, body = ask(s, "/v1/auth/api", [("X-Api-Key", "abc")])
    assert status == 429, "spent by RESP and /v1/check: %r" % body
    status, body = ask(s, "/v1/check?policy=api&key=abc:GET")
    assert status == 400 and body["field"] == "key", body
    assert ask(s, "/v1/auth/api", [("X-Api-Key", "abc")], method="POST")[0] == 200


def test_forward_auth_and_the_module_meet_on_one_store_key(make_server, tmp_path):
    """sluiced on a central Redis with the module: a forward-auth take and the module's own
    SL.POLICY (its CONFIG the same file) spend one state."""
    conf = "policies:\n" + policy("api", "{policy}:{header.x-api-key}:{method}", limit=3)
    path = tmp_path / "sluice.yaml"
    path.write_text(conf)
    redis = RedisServer(str(tmp_path / "redis"), module_args=["CONFIG", str(path)]).start()
    try:
        s = start(make_server, tmp_path, conf, "--store", "redis://127.0.0.1:%d" % redis.port,
                  "--store-timeout-ms", "2000")
        assert ask(s, "/v1/auth/api", [("X-Api-Key", "abc")])[0] == 200
        r = redis.client()
        try:
            d = r.execute_command("SL.POLICY", "api", "api:abc:GET")
            d = {k.decode(): v for k, v in zip(d[0::2], d[1::2])}
            assert (d["allowed"], d["remaining"]) == (1, 1), d
            assert r.exists("api:abc:GET") == 1 and r.exists("abc") == 0
        finally:
            r.close()
        status, body = ask(s, "/v1/auth/api", [("X-Api-Key", "abc")])
        assert status == 200 and body["remaining"] == 0, body
        assert ask(s, "/v1/auth/api", [("X-Api-Key", "abc")])[0] == 429
    finally:
        redis.stop()


def test_old_templates_write_the_keys_they_always_wrote(make_server, tmp_path):
    # the store keys sluice wrote for these templates before they were parsed
    cases = [("dflt", None, "dflt:alice"), ("pre", "api:{key}", "api:alice"),
             ("bare", "{key}", "alice"), ("mix", "x{key}y{policy}", "xaliceymix")]
    conf = "policies:\n"
    for name, key, _ in cases:
        conf += "  %s:\n    limit: 2\n    period: 1h\n" % name
        if key:
            conf += "    key: '%s'\n" % key
    s = start(make_server, tmp_path, conf, "--snapshot", str(tmp_path / "snap"))
    has = stored(s)
    for name, _, store_key in cases:
        with s.conn() as c:
            d = as_map(c.call("SL.POLICY", name, "alice"))
            assert d["remaining"] == 1, (name, d)
        assert has(store_key), name
        # forward-auth's key header is the same {key}: the same state
        status, body = ask(s, "/v1/auth/" + name, [("X-Api-Key", "alice")])
        assert status == 200 and body["remaining"] == 0, (name, body)
    # a state of the old name, restored from a snapshot, is the policy's
    s.stop()
    s.start()
    with s.conn() as c:
        d = as_map(c.call("SL.POLICY", "pre", "alice"))
        assert d["allowed"] == 0, "used up before the restart: %r" % d


def test_a_single_brace_is_refused_with_the_spelling_that_writes_the_same_keys(make_server,
                                                                              tmp_path):
    bad = "policies:\n" + policy("api", "{api}:{key}")
    path = tmp_path / "sluice.yaml"
    path.write_text(bad)
    s = make_server(args=["--config", str(path)], start=False)
    s.launch()
    assert s.proc.wait(timeout=15) != 0
    err = s.stderr()
    assert "unknown part '{api}' at column 1" in err, err
    assert '"{{api}}:{key}" writes the keys this template wrote before' in err, err
    # a SIGHUP to such a file keeps the policies in force, and says so
    s2 = start(make_server, tmp_path, "policies:\n" + policy("api", "{{api}}:{key}"))
    with s2.conn() as c:
        assert as_map(c.call("SL.POLICY", "api", "u"))["remaining"] == 1
        assert c.call("SL.INSPECT", "{api}:u") is not None
        before = s2.stderr()
        path.write_text(bad)
        os.kill(s2.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "config refused" not in s2.stderr()[len(before):]:
            assert time.monotonic() < deadline, s2.stderr()
            time.sleep(0.05)
        log = s2.stderr()[len(before):]
        assert "keeping the old policies" in log and "{{api}}:{key}" in log, log
        assert as_map(c.call("SL.POLICY", "api", "u"))["remaining"] == 0, "the same state"


def test_the_policies_show_the_templates_as_written(make_server, tmp_path):
    conf = "policies:\n" + policy("api", "{policy}:{header.X-Api-Key}", "{ip/24}") + \
        policy("plain", "{key}")
    s = start(make_server, tmp_path, conf)
    with s.conn() as c:
        got = {as_map(p)["name"]: as_map(p) for p in c.call("SL.POLICIES")}
    assert got[b"api"]["key"] == b"{policy}:{header.X-Api-Key}"
    assert got[b"api"]["key_fallback"] == b"{ip/24}"
    assert got[b"plain"]["key"] == b"{key}" and "key_fallback" not in got[b"plain"]
    status, body = ask(s, "/v1/policies")
    assert status == 200
    by_name = {p["name"]: p for p in body["policies"]}
    assert by_name["api"]["key"] == "{policy}:{header.X-Api-Key}"
    assert by_name["api"]["key_fallback"] == "{ip/24}"
    assert "key_fallback" not in by_name["plain"]
