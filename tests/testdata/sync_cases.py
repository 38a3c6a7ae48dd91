"""Cases for the sync strategy's central half (src/algo/quota.h), which three
implementations must answer alike: the C rules themselves (build/tests/quota_replay),
the module's SL.SYNC (tests/module/test_sync.py) and sluice.lua's SYNC
(tests/module/test_lua_sync.py).

A case is (name, config, syncs):
  config  (algorithm, limit, period_ns, burst, interval_ns, nodes)
  syncs   a list of (at_ns, node, admitted, asked, length_ns, carry), sent in order to one
          key with the central's clock given as at_ns (SL.SYNC's AT)
Times go forward mostly and sometimes back (a central whose clock steps back refills
nothing). Values stay below 2^53 so that the Lua script, which has only doubles, is
exact on every case.
"""

import random

SCALE = 65536
SEC = 1000000000
T0 = 1764547200 * SEC  # 2025-12-01 UTC: a Unix time in nanoseconds, as Redis's clock is


def replay_script(config, syncs):
    """The quota_replay input for one case."""
    lines = ["config %s %d %d %d %d %d" % config]
    lines += ["sync %d %d %d %d %d %d" % s for s in syncs]
    lines.append("state")
    return "\n".join(lines) + "\n"


def _fleet(rng, config, steps):
    """A fleet's syncs: each node syncs about every interval, reporting what it
    admitted and was asked (admitted never above asked), with jitter, a silent node
    now and then (its lease ends), a restart (carry back to 0) and a step back."""
    _, limit, period, burst, interval, nodes = config
    t = T0 + rng.randrange(0, SEC)
    syncs = []
    for _ in range(steps):
        node = rng.randrange(nodes)
        dt = rng.choice([0, 1, interval // 3, interval, interval, interval * 2,
                         interval * 4, rng.randrange(1, 10 * interval)])
        if rng.random() < 0.05:
            dt = -rng.randrange(1, interval + 1)  # the central's clock steps back
        t = max(T0, t + dt)
        asked = rng.choice([0, 1, 2, rng.randrange(0, 4 * burst + 2)])
        admitted = rng.randrange(0, asked + 1)
        length = rng.choice([0, interval, rng.randrange(0, 3 * interval)])
        carry = rng.choice([0, SCALE, rng.randrange(0, SCALE + 1)])
        syncs.append((t, node, admitted, asked, length, carry))
    return syncs


def _cases():
    rng = random.Random(19)
    configs = [
        ("gcra", 100, SEC, 100, SEC // 10, 3),
        ("gcra", 7, SEC, 3, SEC // 10, 3),
        ("token_bucket", 1000, 60 * SEC, 50, SEC // 10, 2),
        ("leaky_bucket", 1, 60 * SEC, 1, SEC // 4, 3),
        ("gcra", 5, SEC, 5, SEC // 10, 16),
        ("token_bucket", 1000000, SEC, 1000000, SEC // 100, 4),
        ("gcra", 3, 86400 * SEC, 10, SEC, 5),
        ("gcra", 1, SEC, 1, SEC // 10, 1),
    ]
    cases = []
    for i, config in enumerate(configs):
        for j in range(3):
            cases.append(("%s-%d-%d" % (config[0], i, j), config, _fleet(rng, config, 40)))
    # Edges, by hand.
    c = ("gcra", 100, SEC, 100, SEC // 10, 3)
    cases.append(("first-sync-reserves-the-others-static-shares", c,
                  [(T0, 0, 0, 100, 0, 0), (T0 + 1, 1, 0, 100, 0, 0)]))
    cases.append(("debt-is-paid-back", c,
                  [(T0, 0, 100, 100, SEC // 10, 0), (T0 + SEC // 10, 0, 400, 900, SEC // 10, 0),
                   (T0 + 2 * SEC // 10, 1, 0, 50, SEC // 10, 0),
                   (T0 + 3 * SEC // 10, 0, 0, 50, SEC // 10, 0)]))
    cases.append(("a-silent-node-loses-its-lease", c,
                  [(T0, 0, 0, 10, 0, 0), (T0 + 1, 1, 0, 10, 0, 0),
                   (T0 + SEC, 1, 0, 10, SEC // 10, 0)]))
    cases.append(("carry-charged-and-given-back", c,
                  [(T0, 0, 0, 1, 0, SCALE), (T0 + SEC // 10, 0, 1, 1, SEC // 10, 0),
                   (T0 + 2 * SEC // 10, 0, 0, 1, SEC // 10, SCALE // 2)]))
    return cases


CASES = _cases()

# Syncs sl_quota_sync refuses (error, state unchanged): (config, sync, error name).
BAD_SYNCS = [
    (("gcra", 100, SEC, 100, SEC // 10, 3), (T0, 3, 0, 0, 0, 0), "argument"),      # node >= nodes
    (("gcra", 100, SEC, 100, SEC // 10, 3), (T0, 0, 2, 1, 0, 0), "argument"),      # admitted > asked
    (("gcra", 100, SEC, 100, SEC // 10, 3), (T0, 0, 0, 0, -1, 0), "argument"),     # length < 0
    (("gcra", 100, SEC, 100, SEC // 10, 3), (T0, 0, 0, 0, 0, SCALE + 1), "argument"),
]
# Configs sl_quota_config_init refuses: (config, error name).
BAD_CONFIGS = [
    (("fixed_window", 100, SEC, 100, SEC // 10, 3), "unsupported"),
    (("gcra", 100, SEC, 100, SEC // 10, 17), "argument"),
    (("gcra", 100, SEC, 100, 0, 3), "argument"),
    (("gcra", 2 ** 44 + 1, SEC, 100, SEC // 10, 3), "limit"),
    (("gcra", 100, SEC, 2 ** 44 + 1, SEC // 10, 3), "burst"),
]
