"""SL.POLICY in the module: policies from a YAML file given as the module argument
CONFIG <path> (docs/configuration.md, docs/module.md)."""

import pytest
import redis

CONFIG = """\
policies:
  api:
    algorithm: gcra
    limit: 100
    period: 1h
    burst: 20
    key: "api:{key}"
    tiers:
      paid: {limit: 10000, period: 1h, burst: 500}
  shared:
    limit: 100
    period: 1h
    global: {limit: 3, period: 1h}
  dry:
    limit: 1
    period: 1h
    shadow: true
  chat:
    limits:
      - {name: rpm, limit: 3, period: 1h}
      - {name: tpm, limit: 1000, period: 1h, cost: tokens}
    global:
      limits: [{name: tpm, limit: 1500, period: 1h, cost: tokens}]
"""


def _dec(reply):
    return {k.decode(): v for k, v in zip(reply[0::2], reply[1::2])}


@pytest.fixture
def policy_server(make_server, tmp_path):
    cfg = tmp_path / "sluice.yaml"
    cfg.write_text(CONFIG)
    return make_server("policy", module_args=["CONFIG", str(cfg)])


def test_policy_takes_under_its_template(policy_server):
    r = policy_server.client()
    d = _dec(r.execute_command("SL.POLICY", "api", "user1"))
    assert (d["allowed"], d["limit"], d["remaining"]) == (1, 20, 19), d
    d = _dec(r.execute_command("SL.POLICY", "api", "user1", "COST", 5))
    assert (d["allowed"], d["remaining"]) == (1, 14), d
    d = _dec(r.execute_command("SL.POLICY", "api", "user2", "TIER", "paid"))
    assert (d["allowed"], d["limit"], d["remaining"]) == (1, 500, 499), d
    # the state lives under the template's key, as a sluice value
    assert r.get("api:user1")[:2] == b"\xf1\x01"
    assert r.exists("user1") == 0
    with pytest.raises(redis.exceptions.ResponseError, match="unknown policy 'nope'"):
        r.execute_command("SL.POLICY", "nope", "user1")
    with pytest.raises(redis.exceptions.ResponseError, match="unknown tier 'gold' for policy 'api'"):
        r.execute_command("SL.POLICY", "api", "user1", "TIER", "gold")
    r.close()


def test_policy_global_limit_is_all_or_nothing(policy_server):
    r = policy_server.client()
    for i in range(3):
        assert _dec(r.execute_command("SL.POLICY", "shared", "u%d" % i))["allowed"] == 1
    d = _dec(r.execute_command("SL.POLICY", "shared", "u9"))
    assert (d["allowed"], d["limit"]) == (0, 3), d  # the global limit refused
    assert r.exists("u9") == 0 or r.get("u9") is None
    d = _dec(r.execute_command("SL.POLICY", "dry", "k"))
    d = _dec(r.execute_command("SL.POLICY", "dry", "k"))
    assert (d["allowed"], d["shadow"], d["would_allow"]) == (1, 1, 0), d
    r.close()


def test_bad_config_refuses_the_load(make_server, tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("policies:\n  api:\n    limit: -5\n    period: 1h\n")
    s = make_server("bad", module_args=["CONFIG", str(cfg)], start=False)
    s.start(expect_ready=False)
    s.proc.wait(timeout=20)
    assert s.proc.returncode != 0
    assert "sluice: " + str(cfg) in s.log(), s.log()


def test_config_in_cluster_mode_is_refused(make_server, tmp_path):
    cfg = tmp_path / "ok.yaml"
    cfg.write_text(CONFIG)
    s = make_server("cl", module_args=["CONFIG", str(cfg)], start=False,
                    args=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"])
    from conftest import cluster_port
    s.start(port=cluster_port(), expect_ready=False)
    s.proc.wait(timeout=20)
    assert s.proc.returncode != 0
    assert "not supported in Redis Cluster" in s.log(), s.log()


def test_module_unload_and_load_again(make_server, tmp_path):
    cfg = tmp_path / "sluice.yaml"
    cfg.write_text(CONFIG)
    s = make_server("unload", module_args=["CONFIG", str(cfg)],
                    args=["--enable-module-command", "local"])
    r = s.client()
    assert _dec(r.execute_command("SL.POLICY", "api", "user1"))["allowed"] == 1
    assert r.execute_command("MODULE", "UNLOAD", "sluice") in (b"OK", "OK", True)
    with pytest.raises(redis.exceptions.ResponseError, match="unknown command"):
        r.execute_command("SL.TAKE", "k", 1, 60)
    from conftest import module_path
    assert r.execute_command("MODULE", "LOAD", module_path()) in (b"OK", "OK", True)
    assert r.execute_command("CL.THROTTLE", "k", 1, 1, 60) == [0, 2, 1, -1, 60]
    r.close()


def test_policy_of_several_limits_with_tokens(policy_server):
    r = policy_server.client()
    d = _dec(r.execute_command("SL.POLICY", "chat", "k", "TOKENS", 700))
    # rpm: 2 requests left; tpm: 300 tokens, not one more request of 700: tpm binds
    assert (d["allowed"], d["binding"], d["remaining"]) == (1, b"chat.tpm", 300), d
    # each limit's state lives at {KEY}\x1fNAME, in one hash slot
    assert r.exists("{chat:k}\x1frpm", "{chat:k}\x1ftpm", "{\x1fglobal\x1fchat}\x1ftpm") == 3
    d = _dec(r.execute_command("SL.POLICY", "chat", "k", "TOKENS", 301))
    assert (d["allowed"], d["rejected_by"], d["binding"], d["remaining"]) == \
        (0, 1, b"chat.tpm", 300), d
    d = _dec(r.execute_command("SL.POLICY", "chat", "k2", "TOKENS", 801))
    assert (d["allowed"], d["rejected_by"], d["scope"]) == (0, 2, b"global"), d
    assert r.exists("{chat:k2}\x1frpm") == 0, "a refused request takes from no limit"
    d = _dec(r.execute_command("SL.POLICY", "chat", "k", "COST", 2, "TOKENS", 300))
    assert (d["allowed"], d["remaining"]) == (1, 0), d
    d = _dec(r.execute_command("SL.POLICY", "chat", "k"))
    assert (d["allowed"], d["rejected_by"], d["binding"]) == (0, 0, b"chat.rpm"), d
    with pytest.raises(redis.exceptions.ResponseError, match="tokens must be a non-negative"):
        r.execute_command("SL.POLICY", "chat", "k", "TOKENS", -5)
    r.close()


def test_usage_of_a_policys_limits(policy_server):
    r = policy_server.client()
    r.execute_command("SL.POLICY", "chat", "u", "TOKENS", 250)
    got = [_dec(m) for m in r.execute_command("SL.USAGE", "u", "POLICY", "chat")]
    assert [(g["name"], g["used"], g["remaining"]) for g in got] == [
        (b"chat.rpm", 1, 2), (b"chat.tpm", 250, 750), (b"chat.global.tpm", 250, 1250)], got
    assert [_dec(m)["used"] for m in r.execute_command("SL.USAGE", "u", "POLICY", "chat")] == \
        [1, 250, 250], "asking consumes nothing"
    r.close()


def _settle(r, *args):
    d = _dec(r.execute_command("SL.SETTLE", *args))
    d["limits"] = {_dec(x)["name"].decode(): _dec(x)["adjusted"] for x in d["limits"]}
    return d


def _used(r, key, policy):
    return {_dec(x)["name"].decode(): _dec(x)["used"]
            for x in r.execute_command("SL.USAGE", key, "POLICY", policy)}


def test_reserve_and_settle_in_the_module(policy_server):
    r = policy_server.client()
    d = _dec(r.execute_command("SL.RESERVE", "chat", "u", "TOKENS", 600))
    assert (d["allowed"], d["ttl_ms"]) == (1, 600000), d
    rid = d["reservation"]
    # the marker shares the key's slot: "{chat:u}\x1freserve\x1f..." beside "{chat:u}\x1frpm"
    markers = [k for k in r.keys("*") if b"\x1freserve\x1f" in k]
    assert len(markers) == 1 and markers[0].startswith(b"{chat:u}\x1freserve\x1f"), markers
    assert b"{chat:u}\x1frpm" in r.keys("*")
    assert r.pttl(markers[0]) > 0, "the marker expires with its TTL"
    s = _settle(r, rid, "TOKENS", 100)
    assert (s["settled"], s["limits"]) == (1, {"chat.rpm": 0, "chat.tpm": -500,
                                               "chat.global.tpm": -500}), s
    assert _settle(r, rid)["settled"] == 0
    assert _used(r, "u", "chat") == {"chat.rpm": 1, "chat.tpm": 100, "chat.global.tpm": 100}
    d = _dec(r.execute_command("SL.RESERVE", "chat", "u", "TOKENS", 10))
    s = _settle(r, d["reservation"], "TOKENS", 1200)  # past the 1000 an hour: a debt
    assert s["limits"]["chat.tpm"] == 1190, s
    d = _dec(r.execute_command("SL.POLICY", "chat", "u", "TOKENS", 1))
    assert (d["allowed"], d["binding"]) == (0, b"chat.tpm"), d
    r.close()


def test_a_settle_reaches_the_replica(make_server, tmp_path):
    from conftest import wait_for
    cfg = tmp_path / "sluice.yaml"
    cfg.write_text(CONFIG)
    primary = make_server("primary", module_args=["CONFIG", str(cfg)])
    replica = make_server("replica", start=False, module_args=["CONFIG", str(cfg)])
    replica.args = ["--replicaof", "127.0.0.1", str(primary.port)]
    replica.start()
    p, rr = primary.client(), replica.client()
    wait_for(lambda: rr.info("replication").get("master_link_status") == "up", "the replica link")
    d = _dec(p.execute_command("SL.RESERVE", "chat", "v", "TOKENS", 700))
    _settle(p, d["reservation"], "TOKENS", 50)
    wait_for(lambda: _used(rr, "v", "chat")["chat.tpm"] == 50, "the settle on the replica")
    p.close()
    rr.close()
