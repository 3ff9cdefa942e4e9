"""Adding logins to a running Mosquitto: a small MQTT 3.1.1 client that sends the dynamic
security plugin's commands (``Accounts.commands`` of ``brokers.mosquitto_logins``) over its
control topic, logged in as the broker set's own login, and reads the plugin's answers.

The price: the plugin writes its whole config after every command, so adding n logins to a
running broker that has N costs time in n x N. Measured through the broker set on this
2-core machine (two brokers, load about 3): one login at 1,000 took 12-29 ms (25-30 ms with
a reload, which also grows with the clients connected); admitting 1,000 to running brokers
took 3.5-4 s (29-185 ms with one reload), 100 took 0.1 s (5 ms). Logins admitted before the
brokers start cost none of that: a broker reads them all from its plugin config (1,000 made
the start of two brokers 0.13 s longer). Logins are sent in chunks of ``CHUNK_LOGINS``, so
a broker serves its clients in between.

Separate from ``brokers.mosquitto_logins`` because it is wire protocol (raw packets over
one socket, a reader, deadlines) with nothing to decide about who is let in, and a broker
that has not started yet never needs it.
"""

from __future__ import annotations

import json
import secrets
import socket
import struct
import time
from typing import Any

from .mosquitto_logins import CONTROL_TOPIC, LOGINS_USERNAME, RESPONSE_TOPIC
from .probe import CONNACK_CODES, connect_packet

CONTROL_TIMEOUT_S = 10.0  # per chunk; a chunk of 100 logins at 2,000 takes about 0.5 s
CHUNK_LOGINS = 100
_ALREADY = "Client already exists"


class ControlError(RuntimeError):
    """A broker did not take the logins sent to it; the message says why, without passwords."""


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack("!H", len(raw)) + raw


def _packet(first: int, body: bytes) -> bytes:
    length, encoded = len(body), bytearray()
    while True:
        byte, length = length % 128, length // 128
        encoded.append(byte | (0x80 if length else 0))
        if not length:
            break
    return bytes([first]) + bytes(encoded) + body


class _Reader:
    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline, self.buffer = sock, deadline, b""

    def _more(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer in time")
        self.sock.settimeout(left)
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("the broker closed the connection")
        self.buffer += chunk

    def packet(self) -> tuple[int, bytes]:
        """(the fixed header's first byte, the body) of the next packet."""
        while True:
            length, multiplier, i = 0, 1, 1
            while i < len(self.buffer) and i <= 4:
                byte = self.buffer[i]
                length += (byte & 0x7F) * multiplier
                multiplier *= 128
                i += 1
                if not byte & 0x80:
                    if len(self.buffer) >= i + length:
                        first, body = self.buffer[0], self.buffer[i:i + length]
                        self.buffer = self.buffer[i + length:]
                        return first, body
                    break
            self._more()


def send_logins(host: str, port: int, login: tuple[str, str], commands: list[dict[str, Any]],
                timeout_s: float = CONTROL_TIMEOUT_S) -> None:
    """Send ``commands`` (``Accounts.commands``) to the plugin of the broker at host:port,
    ``CHUNK_LOGINS`` at a time, each answered before the next; raises ControlError naming
    the first login a broker refused (a login it already has is no refusal), OSError or
    TimeoutError when it cannot be reached or does not answer within ``timeout_s`` a chunk."""
    username, password = login
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = _Reader(sock, time.monotonic() + timeout_s)
        sock.sendall(connect_packet(username, username, password))
        first, body = reader.packet()
        if first != 0x20 or len(body) < 2:
            raise ControlError(f"the broker answered the CONNECT of {LOGINS_USERNAME} with packet 0x{first:02x}")
        if body[1] != 0:
            raise ControlError(f"the broker refused the broker set's own login ({LOGINS_USERNAME}): CONNACK "
                               f"{body[1]} ({CONNACK_CODES.get(body[1], 'unknown')})")
        sock.sendall(_packet(0x82, struct.pack("!H", 1) + _string(RESPONSE_TOPIC) + b"\x00"))
        first, body = reader.packet()
        if first != 0x90 or body[2:3] == b"\x80":
            raise ControlError(f"the broker refused the broker set's subscription to {RESPONSE_TOPIC}")
        for start in range(0, len(commands), CHUNK_LOGINS):
            reader.deadline = time.monotonic() + timeout_s
            _request(sock, reader, commands[start:start + CHUNK_LOGINS])
        sock.sendall(b"\xe0\x00")  # DISCONNECT


def _request(sock: socket.socket, reader: _Reader, chunk: list[dict[str, Any]]) -> None:
    token = secrets.token_hex(8)
    tagged = [{**c, "correlationData": f"{token}-{i}"} for i, c in enumerate(chunk)]
    sock.sendall(_packet(0x30, _string(CONTROL_TOPIC) + json.dumps({"commands": tagged}).encode()))
    while True:
        first, body = reader.packet()
        if first >> 4 != 3:  # not a PUBLISH: nothing else is asked for here
            continue
        topic_length = struct.unpack("!H", body[:2])[0]
        topic = body[2:2 + topic_length].decode(errors="replace")
        offset = 2 + topic_length + (2 if first & 0x06 else 0)
        if topic != RESPONSE_TOPIC:
            continue
        try:
            responses = json.loads(body[offset:])["responses"]
        except (ValueError, KeyError, TypeError):
            raise ControlError("the broker answered the broker set's logins with something else "
                               "than the plugin's responses") from None
        ours = {r.get("correlationData"): r for r in responses if isinstance(r, dict)}
        if not any(isinstance(k, str) and k.startswith(token) for k in ours):
            continue  # another request's answer
        for i, command in enumerate(chunk):
            answer = ours.get(f"{token}-{i}")
            if answer is None:
                raise ControlError(f"the broker did not answer for login {command['username']!r}")
            error = answer.get("error")
            if error and error != _ALREADY:
                raise ControlError(f"the broker refused login {command['username']!r}: {error}")
        return
