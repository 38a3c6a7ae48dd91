"""The command cases shared with sluiced (tests/testdata/command_cases.py), against
the module in a real redis-server, in RESP2 and RESP3."""

import uuid

import pytest

import command_cases
from respclient import Error


def _error(reply):
    return reply.message if isinstance(reply, Error) else None


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def client(request, server):
    c = server.conn(request.param)
    yield c
    c.close()


def _call(c):
    def call(*args):
        c.send_command(*args)
        return c.read_reply()
    return call


@pytest.mark.parametrize("name,steps", command_cases.CASES, ids=[n for n, _ in command_cases.CASES])
def test_shared_case(client, name, steps):
    command_cases.run_case(_call(client), _error, name, steps, uuid.uuid4().hex[:8])


def test_decisions_are_maps_in_resp3(server, key):
    c = server.conn(3)
    assert isinstance(c.call("SL.TAKE", key, 10, 60), dict)
    c3 = server.conn(2)
    assert isinstance(c3.call("SL.TAKE", key, 10, 60), list)
    c.close()
    c3.close()
