"""MQTT 3.1.1 as the memory network's broker speaks it on a TCP listener
(``mqtt_listener``): bytes to the broker's packet tuples (``mqtt_broker``) and back, for
exactly the packets that broker knows (CONNECT, CONNACK, PUBLISH at QoS 0 and 1, PUBACK,
SUBSCRIBE, SUBACK, UNSUBSCRIBE, UNSUBACK, PINGREQ, PINGRESP, DISCONNECT). A packet is
checked as Mosquitto 2.0 checks it from an MQTT 3.1.1 client (each rule compared on the
wire with the broker set's Mosquitto); ``Malformed`` is what closes a connection:

- a remaining length over ``MAX_PACKET_BYTES`` (known before the body is read) or longer
  than four bytes, a body shorter or longer than its fields, a string that is not UTF-8
  or holds U+0000, a packet id 0;
- fixed header flags other than the packet type's, a packet type the broker does not know
  (server packets; QoS 2 flows, see below);
- a topic name with a wildcard or empty, a SUBSCRIBE or UNSUBSCRIBE without a filter, a
  requested QoS above 2, the connect flags MQTT 3.1.1 forbids (section 3.1.2).

Where Mosquitto lets a rule of the standard go, so does this: a PUBACK's or PINGREQ's
flags and extra bytes, DUP on a QoS 0 PUBLISH. ``Refused`` is a CONNECT answered with a
refusing CONNACK before the close: a protocol level other than 4 (code 1), a persistent
session without a client id (code 2).

Where the memory broker differs from Mosquitto, since it implements what joynr uses and no
more, the connection is closed rather than served otherwise in silence: a will (the broker
keeps none), a PUBLISH at QoS 2 and PUBREC, PUBREL, PUBCOMP (it has no QoS 2 flows; a QoS 2
subscription is granted QoS 1), MQTT 3.1 (protocol ``MQIsdp``, refused with CONNACK 1).

Pure: no sockets, loops or clocks; apart from the listener so that it is tested alone.
"""

from __future__ import annotations

import struct

# Larger than any joynr frame (core.limits: 1 MiB) with room to spare; what is bigger is
# refused before it is buffered, so one client cannot make the broker hold it in memory.
# (Mosquitto as the broker set runs it takes up to MQTT's own limit, 256 MiB.)
MAX_PACKET_BYTES = 16 * 1024 * 1024

CONNECT, CONNACK, PUBLISH, PUBACK, SUBSCRIBE, SUBACK = 1, 2, 3, 4, 8, 9
UNSUBSCRIBE, UNSUBACK, PINGREQ, PINGRESP, DISCONNECT = 10, 11, 12, 13, 14
CONNACK_BAD_PROTOCOL, CONNACK_BAD_CLIENT_ID = 1, 2


class Malformed(ValueError):
    """A packet MQTT 3.1.1 (or this broker) does not accept: its connection is closed."""


class Refused(Malformed):
    """A CONNECT answered with a refusing CONNACK ``code`` before its connection is closed."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


def split_packet(buf: bytearray, max_bytes: int = MAX_PACKET_BYTES) -> tuple[int, int, bytes] | None:
    """The first whole packet of ``buf`` as (type, flags, body), removed from ``buf``; None
    while it is incomplete. Malformed as soon as its remaining length is known to be bad."""
    length, i = 0, 1
    while True:
        if i >= len(buf):
            return None
        byte = buf[i]
        length |= (byte & 0x7F) << (7 * (i - 1))
        i += 1
        if not byte & 0x80:
            break
        if i > 4:  # MQTT 3.1.1 section 2.2.3: at most four bytes
            raise Malformed("remaining length longer than four bytes")
    if length > max_bytes:
        raise Malformed(f"packet of {length} bytes, at most {max_bytes}")
    if len(buf) < i + length:
        return None
    packet = (buf[0] >> 4, buf[0] & 0x0F, bytes(buf[i:i + length]))
    del buf[:i + length]
    return packet


class _Fields:
    """A packet body read field by field; reading past its end is Malformed."""

    def __init__(self, body: bytes) -> None:
        self.body, self.at = body, 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.body):
            raise Malformed("packet shorter than its fields")
        part = self.body[self.at:self.at + n]
        self.at += n
        return part

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return struct.unpack(">H", self.take(2))[0]

    def binary(self) -> bytes:
        return self.take(self.u16())

    def string(self) -> str:
        try:
            text = self.binary().decode("utf-8")
        except UnicodeDecodeError:
            raise Malformed("a string that is not UTF-8") from None
        if "\x00" in text:  # MQTT 3.1.1 section 1.5.3 [MQTT-1.5.3-2]
            raise Malformed("a string holding U+0000")
        return text

    def packet_id(self) -> int:
        pid = self.u16()
        if pid == 0:  # [MQTT-2.3.1-1]
            raise Malformed("packet id 0")
        return pid

    def rest(self) -> bytes:
        part, self.at = self.body[self.at:], len(self.body)
        return part

    def more(self) -> bool:
        return self.at < len(self.body)

    def end(self) -> None:
        if self.more():
            raise Malformed("packet longer than its fields")


# [MQTT-2.2.2-2]; None: any, as Mosquitto does not look at them.
_FLAGS = {CONNECT: 0, PUBACK: None, SUBSCRIBE: 2, UNSUBSCRIBE: 2, PINGREQ: None, DISCONNECT: 0}


def decode(kind: int, flags: int, body: bytes) -> tuple:
    """A client's packet as the broker's tuple; Malformed (or Refused) when it is not one."""
    if kind != PUBLISH and (kind not in _FLAGS or _FLAGS[kind] not in (None, flags)):
        raise Malformed(f"packet type {kind} with flags {flags:#x}" if kind in _FLAGS else f"packet type {kind}")
    f = _Fields(body)
    if kind == CONNECT:
        return _connect(f)
    if kind == PUBLISH:
        qos, dup, retain = (flags >> 1) & 3, bool(flags & 8), bool(flags & 1)
        if qos == 3:  # [MQTT-3.3.1-4]
            raise Malformed("PUBLISH with QoS 3")
        if qos == 2:
            raise Malformed("PUBLISH with QoS 2: the memory broker has no QoS 2 flows")
        topic = f.string()
        if not topic or "+" in topic or "#" in topic:  # [MQTT-3.3.2-2], section 4.7.3
            raise Malformed("PUBLISH to an empty topic or one with a wildcard")
        pid = f.packet_id() if qos else 0
        return ("publish", pid, topic, f.rest(), qos, dup, retain)
    if kind == PUBACK:
        return ("puback", f.packet_id())  # what follows it is not read, as by Mosquitto
    if kind in (SUBSCRIBE, UNSUBSCRIBE):
        pid, filters = f.packet_id(), []
        while f.more():
            topic_filter = f.string()
            if kind == UNSUBSCRIBE:
                filters.append(topic_filter)
                continue
            qos = f.u8()
            if qos > 2:  # [MQTT-3.8.3-4]: reserved bits set or QoS 3
                raise Malformed(f"SUBSCRIBE with requested QoS byte {qos:#x}")
            filters.append((topic_filter, qos))
        if not filters:  # [MQTT-3.8.3-3], [MQTT-3.10.3-2]
            raise Malformed("SUBSCRIBE or UNSUBSCRIBE without a topic filter")
        return ("subscribe" if kind == SUBSCRIBE else "unsubscribe", pid, filters)
    if kind == PINGREQ:
        return ("pingreq",)  # a body is not read, as by Mosquitto
    f.end()
    return ("disconnect",)


def _connect(f: _Fields) -> tuple:
    name, level = f.string(), f.u8()
    if name not in ("MQTT", "MQIsdp"):  # [MQTT-3.1.2-1]
        raise Malformed(f"CONNECT for protocol {name[:20]!r}")
    if (name, level) != ("MQTT", 4):  # [MQTT-3.1.2-2]
        raise Refused(CONNACK_BAD_PROTOCOL, f"protocol {name} level {level}: only MQTT 3.1.1 (level 4)")
    flags, keepalive = f.u8(), f.u16()
    will, username_flag, password_flag = bool(flags & 0x04), bool(flags & 0x80), bool(flags & 0x40)
    if flags & 0x01:  # [MQTT-3.1.2-3]
        raise Malformed("CONNECT with the reserved flag set")
    if (flags & 0x18) == 0x18 or (not will and flags & 0x38):  # [MQTT-3.1.2-11, -13, -14, -15]
        raise Malformed("CONNECT with will QoS or retain not matching its will flag")
    if password_flag and not username_flag:  # [MQTT-3.1.2-22]
        raise Malformed("CONNECT with a password and no username")
    client_id = f.string()
    if will:
        f.string(), f.binary()
    username = f.string() if username_flag else None
    password = f.binary().decode("utf-8", "replace") if password_flag else None
    f.end()
    clean = bool(flags & 0x02)
    if will:
        raise Malformed("CONNECT with a will: the memory broker keeps no wills")
    if not client_id and not clean:  # [MQTT-3.1.3-8]
        raise Refused(CONNACK_BAD_CLIENT_ID, "a persistent session without a client id")
    return ("connect", client_id, username, password, clean, float(keepalive))


def _remaining_length(n: int) -> bytes:
    out = bytearray()
    while True:
        n, byte = divmod(n, 128)
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack(">H", len(data)) + data


def encode(packet: tuple) -> bytes:
    """The broker's packet tuple as MQTT 3.1.1 bytes."""
    kind = packet[0]
    if kind == "publish":
        _, pid, topic, payload, qos, dup, retain = packet
        first = 0x30 | (0x08 if dup else 0) | (qos << 1) | (0x01 if retain else 0)
        body = _string(topic) + (struct.pack(">H", pid) if qos else b"") + bytes(payload)
    elif kind == "connack":
        first, body = 0x20, bytes([1 if packet[2] else 0, packet[1]])
    elif kind == "suback":
        first, body = 0x90, struct.pack(">H", packet[1]) + bytes(packet[2])
    elif kind in ("puback", "unsuback"):
        first, body = (0x40 if kind == "puback" else 0xB0), struct.pack(">H", packet[1])
    elif kind == "pingresp":
        first, body = 0xD0, b""
    else:
        raise ValueError(f"packet: the broker sends no {kind!r}")
    return bytes([first]) + _remaining_length(len(body)) + body
