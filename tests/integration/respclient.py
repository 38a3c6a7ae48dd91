"""A small raw RESP2/RESP3 client for the integration tests.

redis-py 4.3 (Debian 12) cannot read RESP3, and the tests need to see exactly which
type the server wrote (a map, not an array; a null, not an empty string) and to send
malformed bytes. This client does both, with a deadline on every read: a server that
hangs fails the test within seconds instead of hanging it.

Reply types:
  +simple      -> Simple (a str subclass)
  -error, !err -> Error (an Exception; returned by read_reply(), raised by call())
  :int, (big   -> int
  $bulk        -> bytes
  =verbatim    -> Verbatim (a bytes subclass with .fmt)
  $-1, *-1, _  -> None
  *array       -> list
  %map         -> dict (keys made hashable: bytes/str/int)
  ~set         -> RespSet (a list subclass, keeps order)
  >push        -> Push (a list subclass)
  #bool        -> bool
  ,double      -> float
  |attribute   -> read and ignored (the reply that follows it is returned)
"""

import socket
import threading
import time


class Error(Exception):
    """An error reply; str(e) is the whole line, e.g. 'ERR unknown command ...'."""

    def __init__(self, message):
        super().__init__(message)
        self.message = message

    @property
    def code(self):
        return self.message.split(" ", 1)[0]


class Simple(str):
    pass


class Verbatim(bytes):
    fmt = b""


class RespSet(list):
    pass


class Push(list):
    pass


class Closed(Exception):
    """The server closed the connection."""


class TimedOut(Exception):
    """No (complete) reply within the deadline."""


def encode(*args):
    """A multibulk command, as every client library sends it."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, host, port, timeout=5.0):
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.pos = 0

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- sending
    def send(self, data):
        self.sock.sendall(data)

    def send_command(self, *args):
        self.send(encode(*args))

    def call(self, *args, timeout=None):
        self.send_command(*args)
        r = self.read_reply(timeout)
        if isinstance(r, Error):
            raise r
        return r

    # -- reading
    def _fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimedOut("no complete reply within the deadline; got %r" % bytes(self.buf[self.pos:][:200]))
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(1 << 16)
        except socket.timeout:
            raise TimedOut("no complete reply within the deadline; got %r" % bytes(self.buf[self.pos:][:200]))
        except ConnectionResetError:
            raise Closed("connection reset by the server")
        if not chunk:
            raise Closed("the server closed the connection; unread: %r" % bytes(self.buf[self.pos:][:200]))
        if self.pos > (1 << 20):
            del self.buf[: self.pos]
            self.pos = 0
        self.buf += chunk

    def _line(self, deadline):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = bytes(self.buf[self.pos : i])
                self.pos = i + 2
                return line
            self._fill(deadline)

    def _exact(self, n, deadline):
        while len(self.buf) - self.pos < n + 2:
            self._fill(deadline)
        data = bytes(self.buf[self.pos : self.pos + n])
        if self.buf[self.pos + n : self.pos + n + 2] != b"\r\n":
            raise AssertionError("bulk reply not terminated by CRLF: %r" % bytes(self.buf[self.pos : self.pos + n + 2]))
        self.pos += n + 2
        return data

    def read_reply(self, timeout=None):
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        return self._read(deadline)

    def _read(self, deadline):
        line = self._line(deadline)
        if not line:
            raise AssertionError("empty reply line")
        t, rest = line[:1], line[1:]
        if t == b"+":
            return Simple(rest.decode("latin-1"))
        if t == b"-":
            return Error(rest.decode("latin-1"))
        if t == b":":
            return int(rest)
        if t == b"(":
            return int(rest)
        if t == b"#":
            assert rest in (b"t", b"f"), line
            return rest == b"t"
        if t == b",":
            return float(rest)
        if t == b"_":
            assert rest == b"", line
            return None
        if t in (b"$", b"=", b"!"):
            n = int(rest)
            if n == -1 and t == b"$":
                return None
            assert n >= 0, line
            data = self._exact(n, deadline)
            if t == b"!":
                return Error(data.decode("latin-1"))
            if t == b"=":
                v = Verbatim(data[4:])
                v.fmt = data[:3]
                return v
            return data
        if t in (b"*", b"~", b">"):
            n = int(rest)
            if n == -1 and t == b"*":
                return None
            assert n >= 0, line
            items = [self._read(deadline) for _ in range(n)]
            if t == b"~":
                return RespSet(items)
            if t == b">":
                return Push(items)
            return items
        if t in (b"%", b"|"):
            n = int(rest)
            assert n >= 0, line
            m = {}
            for _ in range(n):
                k = self._read(deadline)
                if isinstance(k, list):
                    k = tuple(k)
                m[k] = self._read(deadline)
            if t == b"|":
                return self._read(deadline)  # an attribute precedes the real reply
            return m
        raise AssertionError("unknown RESP type byte in reply line %r" % line)

    def raw_available(self):
        return bytes(self.buf[self.pos :])

    def wait_closed(self, timeout=None):
        """Reads until the server closes the connection; returns what came before the close.
        Raises TimedOut if the connection is still open at the deadline."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            try:
                self._fill(deadline)
            except Closed:
                data = bytes(self.buf[self.pos :])
                self.pos = len(self.buf)
                return data


def as_map(reply):
    """A decision (or any map reply) as a dict with str keys, from either a RESP3 map or
    a RESP2 flat array of alternating names and values."""
    if isinstance(reply, dict):
        items = list(reply.items())
    else:
        assert isinstance(reply, list), "expected a map or a flat array, got %r" % (reply,)
        assert len(reply) % 2 == 0, "a RESP2 map must have an even length: %r" % (reply,)
        items = list(zip(reply[0::2], reply[1::2]))
    out = {}
    for k, v in items:
        if isinstance(k, bytes):
            k = k.decode()
        out[str(k)] = v
    return out


def pipeline(conn, commands, timeout=60):
    """Sends every command in one stream (from a thread, so that neither side can block
    the other on full socket buffers) and reads len(commands) replies, in order."""
    data = b"".join(encode(*c) for c in commands)
    err = []

    def send():
        try:
            conn.send(data)
        except BaseException as e:
            err.append(e)

    t = threading.Thread(target=send, daemon=True)
    t.start()
    deadline = time.monotonic() + timeout
    replies = [conn._read(deadline) for _ in range(len(commands))]
    t.join(max(0.1, deadline - time.monotonic()))
    assert not t.is_alive(), "the sender did not finish"
    assert not err, err
    return replies
