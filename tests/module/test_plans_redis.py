"""SL.POLICY in the module with plans from a Redis hash (plans: redis:NAME in the CONFIG
file): the module reads the hash in its own keyspace at each command (HGET NAME key), so a
change in the hash is seen by the next command; an unknown key or a value naming no tier
gets the default tier; a key of another type is a clear error."""

import pytest
import redis

CONFIG = """\
policies:
  api:
    limit: 2
    period: 1h
    plans: redis:plans
    tiers:
      free: {limit: 5, period: 1h}
      paid: {limit: 500, period: 1h}
"""


def _dec(reply):
    return {k.decode(): v for k, v in zip(reply[0::2], reply[1::2])}


@pytest.fixture
def plans_server(make_server, tmp_path):
    cfg = tmp_path / "sluice.yaml"
    cfg.write_text(CONFIG)
    return make_server("plans", module_args=["CONFIG", str(cfg)])


def limit(r, key):
    return _dec(r.execute_command("SL.POLICY", "api", key))["limit"]


def test_a_keys_tier_is_read_from_the_hash_at_each_command(plans_server):
    r = plans_server.client()
    assert limit(r, "alice") == 2, "no hash yet: the default tier"
    r.hset("plans", mapping={"alice": "paid", "bob": "free", "carol": "gold",
                             b"bin\x00ary": "paid"})
    assert limit(r, "alice") == 500
    assert limit(r, "bob") == 5
    assert limit(r, "carol") == 2, "a value naming no tier: the default"
    assert limit(r, "stranger") == 2
    assert limit(r, b"bin\x00ary") == 500
    r.hset("plans", "bob", "paid")
    assert limit(r, "bob") == 500, "seen by the next command"
    with pytest.raises(redis.exceptions.ResponseError,
                       match="takes each key's tier from its plans hash: a request cannot"):
        r.execute_command("SL.POLICY", "api", "bob", "TIER", "free")
    r.delete("plans")
    r.set("plans", "not a hash")
    with pytest.raises(redis.exceptions.ResponseError,
                       match="reads its plans from the key 'plans', which holds another type"):
        r.execute_command("SL.POLICY", "api", "bob")
    r.close()
