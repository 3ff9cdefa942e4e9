"""One MQTT CONNECT over a raw socket: is a broker there, and does it take the credentials?

The broker set asks this of a broker it started (until it answers), of an external one
(once, at start) and of a Mosquitto broker it told to reload its users (until the newest
one is let in: ``probe_blocking``, from whichever thread asked for credentials). Raw
bytes rather than a client library: one packet out, four bytes back, no threads, and the
answer is the CONNACK return code itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct

CONNACK_CODES = {
    1: "unacceptable protocol version", 2: "identifier rejected", 3: "server unavailable",
    4: "bad user name or password", 5: "not authorized",
}


def connect_packet(client_id: str, username: str, password: str) -> bytes:
    """An MQTT 3.1.1 CONNECT with a clean session, a username and a password."""
    def s(value: str) -> bytes:
        raw = value.encode()
        return struct.pack("!H", len(raw)) + raw

    flags = 0x80 | 0x40 | 0x02  # username, password, clean session
    body = s("MQTT") + bytes([4, flags]) + struct.pack("!H", 10) + s(client_id) + s(username) + s(password)
    length = len(body)
    encoded = bytearray()
    while True:
        byte, length = length % 128, length // 128
        encoded.append(byte | (0x80 if length else 0))
        if not length:
            break
    return bytes([0x10]) + bytes(encoded) + body


async def probe(host: str, port: int, packet: bytes) -> int:
    """Send ``packet``; the CONNACK's return code (0: accepted, then DISCONNECT)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(packet)
        await writer.drain()
        connack = await reader.readexactly(4)
        if connack[0] != 0x20:
            raise OSError(f"expected CONNACK, got packet type byte 0x{connack[0]:02x}")
        if connack[3] == 0:
            writer.write(b"\xe0\x00")  # DISCONNECT
            await writer.drain()
        return connack[3]
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def probe_blocking(host: str, port: int, packet: bytes, timeout_s: float) -> int:
    """``probe`` on a blocking socket, for callers that are not coroutines."""
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(packet)
        connack = b""
        while len(connack) < 4:
            chunk = sock.recv(4 - len(connack))
            if not chunk:
                raise ConnectionResetError(f"connection closed after {len(connack)} bytes of CONNACK")
            connack += chunk
        if connack[0] != 0x20:
            raise OSError(f"expected CONNACK, got packet type byte 0x{connack[0]:02x}")
        if connack[3] == 0:
            sock.sendall(b"\xe0\x00")  # DISCONNECT
        return connack[3]


def reason(exc: BaseException) -> str:
    """Why a connection failed, in the system's words ("Connection refused")."""
    if isinstance(exc, OSError):
        if exc.errno is not None and exc.errno > 0:  # asyncio rewords refusals as "Connect call failed"
            return os.strerror(exc.errno)
        if exc.strerror:
            return exc.strerror
    return str(exc) or type(exc).__name__
