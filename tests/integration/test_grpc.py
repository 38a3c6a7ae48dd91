"""The gRPC face (--grpc-port; src/server/grpc.c) with a real gRPC client, Python's grpcio.

The message classes are built at test time from the repository's own proto/*.proto:
protoc-c writes a descriptor set (-o, --include_imports) and python3-protobuf makes the
classes from it; calls go through grpcio's generic unary_unary, by method path, as a
generated stub's would. What is checked: Health/Check answers SERVING (the rate limit
service once it has a configuration); ShouldRateLimit decodes its request (a broken one is
INVALID_ARGUMENT naming what broke), and without --envoy-config answers UNAVAILABLE; many
concurrent calls on one channel; large requests past
HTTP/2's initial flow control windows; a deadline passed before the request is whole is
answered DEADLINE_EXCEEDED by the server; a stream the client resets half way; bytes that
are not HTTP/2 close the connection, and the server keeps serving. The frames no gRPC
library sends come from python3-h2's HTTP/2 state machine over a plain socket.
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import grpc
import h2.config
import h2.connection
import h2.events
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from conftest import ROOT, Sluiced, free_port
from harness import sigstop

HEALTH = "/grpc.health.v1.Health/Check"
RLS = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"


def _classes():
    """The message classes, from protoc-c's descriptor set of proto/."""
    proto = os.path.join(ROOT, "proto")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "sluice.pb")
        subprocess.run(["protoc-c", "--proto_path=" + proto, "--include_imports", "-o", out,
                        "envoy/service/ratelimit/v3/rls.proto", "grpc/health/v1/health.proto"],
                       check=True)
        with open(out, "rb") as f:
            fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    factory = message_factory.MessageFactory(pool)

    def cls(name):
        return factory.GetPrototype(pool.FindMessageTypeByName(name))

    return {
        "req": cls("envoy.service.ratelimit.v3.RateLimitRequest"),
        "resp": cls("envoy.service.ratelimit.v3.RateLimitResponse"),
        "hreq": cls("grpc.health.v1.HealthCheckRequest"),
        "hresp": cls("grpc.health.v1.HealthCheckResponse"),
    }


M = _classes()
SERVING = 1
NOT_SERVING = 2


EDGE = """\
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 1000000}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000000}
"""


@pytest.fixture(scope="module")
def grpc_server(tmp_path_factory):
    port = free_port()
    d = tmp_path_factory.mktemp("envoy")
    (d / "edge.yaml").write_text(EDGE)
    s = Sluiced(args=["--grpc-port", str(port), "--envoy-config", str(d), "--log-level",
                      "debug"])
    s.grpc_port = port
    s.start()
    yield s
    s.stop()


@pytest.fixture
def channel(grpc_server):
    ch = grpc.insecure_channel("127.0.0.1:%d" % grpc_server.grpc_port)
    grpc.channel_ready_future(ch).result(timeout=10)
    yield ch
    ch.close()


def health(ch):
    return ch.unary_unary(HEALTH, request_serializer=M["hreq"].SerializeToString,
                          response_deserializer=M["hresp"].FromString)


def rls(ch, raw=False):
    ser = (lambda b: b) if raw else M["req"].SerializeToString
    return ch.unary_unary(RLS, request_serializer=ser, response_deserializer=M["resp"].FromString)


def request(domain="edge", descriptors=(("remote_address", "10.0.0.1"),)):
    r = M["req"](domain=domain)
    for pairs in descriptors:
        d = r.descriptors.add()
        for k, v in [pairs] if isinstance(pairs[0], str) else pairs:
            e = d.entries.add()
            e.key, e.value = k, v
    return r


def code_of(call, *args, **kw):
    with pytest.raises(grpc.RpcError) as ei:
        call(*args, **kw)
    return ei.value.code(), ei.value.details()


def test_health_check_is_serving(channel):
    assert health(channel)(M["hreq"](), timeout=10).status == SERVING
    named = M["hreq"](service="envoy.service.ratelimit.v3.RateLimitService")
    assert health(channel)(named, timeout=10).status == SERVING


def test_without_envoy_config_the_service_is_not_serving(make_server):
    port = free_port()
    make_server(args=["--grpc-port", str(port)])
    ch = grpc.insecure_channel("127.0.0.1:%d" % port)
    try:
        # a health checker must not send Envoy to a server with nothing to serve
        named = M["hreq"](service="envoy.service.ratelimit.v3.RateLimitService")
        assert health(ch)(named, timeout=10).status == NOT_SERVING
        assert health(ch)(M["hreq"](), timeout=10).status == SERVING
        code, details = code_of(rls(ch), request(), timeout=10)
        assert code == grpc.StatusCode.UNAVAILABLE
        assert "--envoy-config" in details
    finally:
        ch.close()


def test_health_check_of_an_unknown_service_is_not_found(channel):
    code, details = code_of(health(channel), M["hreq"](service="nope.Nothing"), timeout=10)
    assert code == grpc.StatusCode.NOT_FOUND
    assert "nope.Nothing" in details


def test_a_password_protects_should_rate_limit(make_server, tmp_path):
    # ShouldRateLimit changes state: with --requirepass (or --http-token) it wants the
    # HTTP port's token as "authorization: Bearer"; a health check does not.
    port = free_port()
    d = tmp_path / "envoy"
    d.mkdir()
    (d / "edge.yaml").write_text(EDGE)
    make_server(args=["--grpc-port", str(port), "--envoy-config", str(d)], password="pw")
    ch = grpc.insecure_channel("127.0.0.1:%d" % port)
    try:
        assert health(ch)(M["hreq"](), timeout=10).status == SERVING
        code, details = code_of(rls(ch), request(), timeout=10)
        assert code == grpc.StatusCode.UNAUTHENTICATED
        assert "authorization: Bearer" in details
        code, _ = code_of(rls(ch), request(), timeout=10,
                          metadata=[("authorization", "Bearer wrong")])
        assert code == grpc.StatusCode.UNAUTHENTICATED
        resp = rls(ch)(request(), timeout=10, metadata=[("authorization", "Bearer pw")])
        assert resp.overall_code == 1 and resp.statuses[0].limit_remaining == 999999
    finally:
        ch.close()


def test_a_broken_request_is_invalid_argument_naming_what_broke(channel):
    # a length past the end of the message
    code, details = code_of(rls(channel, raw=True), b"\x0a\x50abc", timeout=10)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a RateLimitRequest" in details
    # one descriptor more than the bound
    many = request(descriptors=[("k", "v%d" % i) for i in range(65)])
    code, details = code_of(rls(channel), many, timeout=10)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "descriptors: more than the bound of 64"
    # a key too long, with the message's percent-encoding read back
    long_key = request(descriptors=[("k" * 300, "v\u00e9")])
    code, details = code_of(rls(channel), long_key, timeout=10)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "descriptors[0].entries[0].key: 300 bytes, over the bound of 255"


def test_an_unknown_method_is_unimplemented(channel):
    call = channel.unary_unary("/sluice.Nothing/Here", request_serializer=lambda b: b,
                               response_deserializer=lambda b: b)
    code, details = code_of(call, b"", timeout=10)
    assert code == grpc.StatusCode.UNIMPLEMENTED
    assert details == "unknown method /sluice.Nothing/Here"


def test_a_request_over_the_message_bound_is_resource_exhausted(channel):
    big = request(descriptors=[[("k%d" % i, "v" * 4000) for i in range(16)]] * 2)
    assert big.ByteSize() > 65536
    code, details = code_of(rls(channel), big, timeout=10)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than 65536 bytes" in details


def test_many_concurrent_calls_on_one_channel(channel):
    h, r = health(channel), rls(channel)
    futures = []
    for i in range(300):
        futures.append(("h", h.future(M["hreq"](), timeout=30)))
        futures.append(("r", r.future(request(descriptors=[("user", "u%d" % i)]), timeout=30)))
    for kind, f in futures:
        if kind == "h":
            assert f.result().status == SERVING
        else:
            resp = f.result()
            assert resp.overall_code == 1 and resp.statuses[0].limit_remaining == 999999


def test_large_requests_past_the_flow_control_windows(channel):
    # Each request is about 48 KB; forty at once are 2 MB on one connection, far past
    # HTTP/2's initial 64 KB windows: they complete only if the server gives the
    # windows back as it reads.
    r = rls(channel)
    body = request(descriptors=[[("k%d" % i, "v" * 4000) for i in range(12)]])
    assert 40000 < body.ByteSize() < 65536
    futures = [r.future(body, timeout=60) for _ in range(40)]
    for f in futures:
        assert f.result().overall_code == 1  # OK: no rule for these keys


class RawH2:
    """An HTTP/2 client of python3-h2's state machine over a plain socket: the frames a
    gRPC library would not send (a request left open, a stream reset half way)."""

    def __init__(self, port):
        # The gRPC port opens just after RESP's, which the fixtures wait for.
        for _ in range(100):
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except ConnectionRefusedError:
                time.sleep(0.05)
        else:
            raise AssertionError("nothing listens on the gRPC port %d" % port)
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=cfg)
        self.conn.initiate_connection()
        self.flush()

    def flush(self):
        self.sock.sendall(self.conn.data_to_send())

    def start(self, stream_id, path, extra=(), end=False):
        headers = [(":method", "POST"), (":scheme", "http"), (":path", path),
                   (":authority", "sluiced"), ("content-type", "application/grpc"),
                   ("te", "trailers")] + list(extra)
        self.conn.send_headers(stream_id, headers, end_stream=end)
        self.flush()

    def send_message(self, stream_id, body, end=True):
        self.conn.send_data(stream_id, b"\x00" + len(body).to_bytes(4, "big") + body,
                            end_stream=end)
        self.flush()

    def answer(self, stream_id):
        """Every header and trailer of stream_id's answer, and its data, once it ends."""
        headers, data = {}, b""
        while True:
            chunk = self.sock.recv(65536)
            assert chunk, "the server closed the connection"
            for ev in self.conn.receive_data(chunk):
                if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)) \
                        and ev.stream_id == stream_id:
                    headers.update(dict(ev.headers))
                elif isinstance(ev, h2.events.DataReceived) and ev.stream_id == stream_id:
                    data += ev.data
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, stream_id)
                elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id == stream_id:
                    self.flush()
                    return headers, data
                elif isinstance(ev, h2.events.StreamReset) and ev.stream_id == stream_id:
                    raise AssertionError("stream %d reset: %s" % (stream_id, ev.error_code))
            self.flush()

    def close(self):
        self.sock.close()


def test_a_deadline_passed_before_the_request_is_whole(grpc_server, channel):
    # Headers with grpc-timeout, and never the message nor the end of the stream: a
    # client with no timer of its own, so the answer can only be the server's.
    c = RawH2(grpc_server.grpc_port)
    try:
        c.start(1, RLS, extra=[("grpc-timeout", "200m")])
        headers, data = c.answer(1)
        assert headers[":status"] == "200"
        assert headers["grpc-status"] == "4"  # DEADLINE_EXCEEDED
        assert headers["grpc-message"] == "the deadline passed before the request was whole"
        assert data == b""
        # the connection goes on: a whole health check on the next stream
        c.start(3, HEALTH)
        c.send_message(3, b"")
        headers, data = c.answer(3)
        assert headers["grpc-status"] == "0"
        assert M["hresp"].FromString(data[5:]).status == SERVING
    finally:
        c.close()


def test_request_timeout_bounds_a_request_without_grpc_timeout(make_server):
    port = free_port()
    make_server(args=["--grpc-port", str(port), "--request-timeout", "1"])
    c = RawH2(port)
    try:
        c.start(1, RLS)  # no grpc-timeout, and never the end of the stream
        headers, _ = c.answer(1)
        assert headers["grpc-status"] == "4"
        assert headers["grpc-message"] == "the request was not whole within --request-timeout"
        # a sooner grpc-timeout is the one that counts
        c.start(3, RLS, extra=[("grpc-timeout", "100m")])
        headers, _ = c.answer(3)
        assert headers["grpc-message"] == "the deadline passed before the request was whole"
    finally:
        c.close()


def test_a_call_with_a_deadline_in_time_is_answered(channel):
    assert health(channel)(M["hreq"](), timeout=2).status == SERVING


def test_a_stream_reset_by_the_client_half_way(grpc_server):
    c = RawH2(grpc_server.grpc_port)
    try:
        c.start(1, RLS)
        c.conn.send_data(1, b"\x00\x00\x00\x01\x00" + b"\x0a" * 100)  # half a message
        c.flush()
        c.conn.reset_stream(1)
        c.flush()
        c.start(3, HEALTH)
        c.send_message(3, b"")
        headers, data = c.answer(3)
        assert headers["grpc-status"] == "0"
        assert M["hresp"].FromString(data[5:]).status == SERVING
    finally:
        c.close()


def test_an_http_request_that_is_not_grpc(grpc_server):
    c = RawH2(grpc_server.grpc_port)
    try:
        c.conn.send_headers(1, [(":method", "GET"), (":scheme", "http"), (":path", HEALTH),
                                (":authority", "sluiced")], end_stream=True)
        c.flush()
        headers, _ = c.answer(1)
        assert headers[":status"] == "405"
        c.conn.send_headers(5, [(":method", "POST"), (":scheme", "http"), (":path", HEALTH),
                                (":authority", "sluiced"), ("content-type", "text/plain")],
                            end_stream=True)
        c.flush()
        headers, _ = c.answer(5)
        assert headers[":status"] == "415"
    finally:
        c.close()


def _closed_by_server(port, data):
    """Sends data on a fresh connection; True when the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        try:
            while s.recv(65536):
                pass
        except ConnectionResetError:
            pass
        return True


def test_garbage_closes_the_connection_and_the_server_serves_on(grpc_server, channel):
    port = grpc_server.grpc_port
    assert _closed_by_server(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert _closed_by_server(port, os.urandom(4096))
    # the right preface, then a frame of an impossible length
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    assert _closed_by_server(port, preface + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
                             + b"\xff\xff\xff\x00\x00\x00\x00\x00\x01" + b"x" * 100)
    assert health(channel)(M["hreq"](), timeout=10).status == SERVING
    grpc_server.assert_serving()


def test_a_port_in_use_is_refused_at_start(make_server):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        s = make_server(args=["--grpc-port", str(port)], start=False)
        s.launch()
        assert s.proc.wait(timeout=20) == 1
        assert "cannot listen on 127.0.0.1:%d (gRPC): Address already in use" % port in s.stderr()


def test_shutdown_with_a_request_still_open(make_server):
    # SIGTERM while a client holds a stream open (no grpc-timeout): the server says
    # GOAWAY, closes the connection and exits 0 (stop() checks), waiting for no client.
    port = free_port()
    s = make_server(args=["--grpc-port", str(port), "--request-timeout", "0"])
    c = RawH2(port)
    try:
        c.start(1, RLS)
        c.start(3, HEALTH)
        c.send_message(3, b"")
        headers, _ = c.answer(3)
        assert headers["grpc-status"] == "0"
        assert s.stop() == 0
        goaway = False
        while True:
            try:
                chunk = c.sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            goaway |= any(isinstance(ev, h2.events.ConnectionTerminated)
                          for ev in c.conn.receive_data(chunk))
        assert goaway
    finally:
        c.close()


# ---- calls the store answers later: a deadline, a reset, a close while they wait ----

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from redis_server import RedisServer  # noqa: E402


@pytest.fixture
def paused_store(make_server, tmp_path):
    """A sluiced on a redis-server that is stopped (SIGSTOP) while the test runs: every
    ShouldRateLimit waits for the store; the test resumes it (resume())."""
    redis = RedisServer(str(tmp_path / "redis"), module=False).start()
    d = tmp_path / "envoy"
    d.mkdir()
    (d / "edge.yaml").write_text(EDGE)
    port = free_port()
    s = make_server(args=["--grpc-port", str(port), "--envoy-config", str(d), "--store",
                          "redis://127.0.0.1:%d" % redis.port, "--store-timeout-ms", "10000"])
    s.grpc_port = port
    # one call while the store answers, so that the script is loaded and connected
    ch = grpc.insecure_channel("127.0.0.1:%d" % port)
    assert rls(ch)(request(), timeout=10).overall_code == 1
    ch.close()
    sigstop(redis.proc.pid)
    s.resume = lambda: os.kill(redis.proc.pid, signal.SIGCONT)
    yield s
    s.resume()
    redis.stop()


def _ask_and_check_it_still_serves(s):
    ch = grpc.insecure_channel("127.0.0.1:%d" % s.grpc_port)
    try:
        resp = rls(ch)(request(descriptors=[("user", "after")]), timeout=10)
        assert resp.overall_code == 1 and resp.statuses[0].limit_remaining == 999999
    finally:
        ch.close()


def test_a_deadline_passed_while_the_store_has_not_answered(paused_store):
    c = RawH2(paused_store.grpc_port)
    try:
        c.start(1, RLS, extra=[("grpc-timeout", "300m")])
        c.send_message(1, request().SerializeToString())
        headers, _ = c.answer(1)
        assert headers["grpc-status"] == "4"  # DEADLINE_EXCEEDED
        assert headers["grpc-message"] == "the deadline passed before the store answered"
    finally:
        c.close()
    # the store's answer, when it comes, finds its call cancelled; the server goes on
    paused_store.resume()
    _ask_and_check_it_still_serves(paused_store)


def test_a_stream_reset_and_a_connection_closed_while_the_store_has_not_answered(paused_store):
    c = RawH2(paused_store.grpc_port)
    c.start(1, RLS)
    c.send_message(1, request().SerializeToString())
    c.conn.reset_stream(1)
    c.flush()
    c.start(3, RLS)
    c.send_message(3, request(descriptors=[("user", "gone")]).SerializeToString())
    # A PING's ACK comes after the server has read every frame before it: both calls
    # are then in the server, waiting for the store.
    c.conn.ping(b"sluice!!")
    c.flush()
    acked = False
    while not acked:
        chunk = c.sock.recv(65536)
        assert chunk
        acked = any(isinstance(ev, h2.events.PingAckReceived) for ev in c.conn.receive_data(chunk))
    c.close()
    paused_store.resume()
    _ask_and_check_it_still_serves(paused_store)
    assert paused_store.alive()
