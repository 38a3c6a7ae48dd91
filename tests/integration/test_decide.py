"""SL.DECIDE in sluiced, on its own store (docs/commands.md, "SL.DECIDE: the central
store's command"): the command's shortest forms are accepted."""


def test_reset_of_one_key(r, key):
    # op lease numkeys key: five words, the shortest SL.DECIDE
    assert r.execute_command("SL.DECIDE", "RESET", "0", 1, key) == 0
    got = r.execute_command("SL.DECIDE", "TAKE", "0", 1, key,
                            "gcra", 10, 60 * 10**9, 0, 1, 0, 0, 0)
    assert got == [-1, 1, 10, 9, 0, 6 * 10**9, 0]
    assert r.execute_command("SL.DECIDE", "RESET", "0", 1, key) == 1
