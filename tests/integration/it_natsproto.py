# SPDX-License-Identifier: Apache-2.0
"""A minimal NATS client for the Python integration tests: the text protocol
over one loopback socket, enough to publish with any headers (malformed ones
included, which no real client would send), to ask the JetStream API and to
read a stream's messages back. Only 127.0.0.1, ever."""

import base64
import json
import socket
import time


class Client:
    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        self.sid = 0
        line = self._line()
        assert line.startswith(b"INFO "), line
        self._send(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,'
                   b'"no_responders":true,"protocol":1}\r\n')
        self.flush()

    def close(self):
        self.sock.close()

    def _send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("nats-server closed the connection")
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _bytes(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def flush(self):
        """Round trip to the server: everything sent before is processed."""
        self._send(b"PING\r\n")
        while True:
            line = self._line()
            if line == b"PONG":
                return
            self._other(line)

    def _other(self, line):
        if line == b"PING":
            self._send(b"PONG\r\n")
        elif line.startswith(b"-ERR"):
            raise RuntimeError(line.decode())

    def publish(self, subject, payload=b"", headers=None, reply=None):
        """Publishes `payload`; `headers` is a list of (name, value) written
        as they are, however wrong."""
        r = (" " + reply) if reply else ""
        if not headers:
            self._send(f"PUB {subject}{r} {len(payload)}\r\n".encode() + payload + b"\r\n")
            return
        hdr = b"NATS/1.0\r\n" + b"".join(k.encode() + b": " + v.encode() + b"\r\n"
                                         for k, v in headers) + b"\r\n"
        self._send(f"HPUB {subject}{r} {len(hdr)} {len(hdr) + len(payload)}\r\n".encode()
                   + hdr + payload + b"\r\n")

    def request(self, subject, payload=b"", timeout=5.0):
        """Sends a request and returns (headers text, payload) of the answer."""
        self.sid += 1
        inbox = f"_INBOX.it{self.sid}.{time.monotonic_ns()}"
        self._send(f"SUB {inbox} {self.sid}\r\n".encode())
        self.publish(subject, payload, reply=inbox)
        end = time.monotonic() + timeout
        try:
            while time.monotonic() < end:
                line = self._line()
                parts = line.split()
                if parts and parts[0] == b"MSG":
                    return "", self._bytes(int(parts[-1]))
                if parts and parts[0] == b"HMSG":
                    data = self._bytes(int(parts[-1]))
                    hlen = int(parts[-2])
                    return data[:hlen].decode(errors="replace"), data[hlen:]
                self._other(line)
            raise TimeoutError(f"no answer on {subject}")
        finally:
            self._send(f"UNSUB {self.sid}\r\n".encode())

    def js(self, api, body=None):
        """Asks the JetStream API ($JS.API.<api>) and returns its JSON."""
        payload = json.dumps(body).encode() if body is not None else b""
        _, data = self.request("$JS.API." + api, payload)
        return json.loads(data)

    def stream_msg(self, stream, seq):
        """Message `seq` of `stream`: (subject, {header: [values]}, data), or
        None when the stream has no such message."""
        r = self.js(f"STREAM.MSG.GET.{stream}", {"seq": seq})
        if "message" not in r:
            return None
        m = r["message"]
        headers = {}
        if m.get("hdrs"):
            for ln in base64.b64decode(m["hdrs"]).decode(errors="replace").split("\r\n")[1:]:
                if ": " in ln:
                    k, v = ln.split(": ", 1)
                    headers.setdefault(k, []).append(v)
        return m["subject"], headers, base64.b64decode(m.get("data", ""))


def pb_varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_bytes(field, value):
    if isinstance(value, str):
        value = value.encode()
    return pb_varint(field << 3 | 2) + pb_varint(len(value)) + value


def event_bytes(eid, etype, payload=b"", headers=(), source="it"):
    """An Event (proto/event.proto) with the given Event headers."""
    out = pb_bytes(1, eid) + pb_bytes(2, etype) + pb_bytes(3, payload) + pb_bytes(5, source)
    for k, v in headers:
        out += pb_bytes(6, pb_bytes(1, k) + pb_bytes(2, v))
    return out


def pb_fields(data):
    """The top-level fields of a protobuf message: [(number, value)], values
    of length-delimited fields as bytes."""
    out, i = [], 0

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    while i < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            out.append((field, varint()))
            continue
        n = varint()
        out.append((field, data[i:i + n]))
        i += n
    return out


def event_headers(data):
    """The Event headers of encoded Event `data`: {key: value}."""
    out = {}
    for field, value in pb_fields(data):
        if field == 6:
            entry = dict(pb_fields(value))
            out[entry.get(1, b"").decode()] = entry.get(2, b"").decode()
    return out
