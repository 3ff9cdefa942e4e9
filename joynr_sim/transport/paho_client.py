"""paho's MQTT client as the asyncio loop runs it (``joynr_sim.transport.mqtt``).

Three of paho's steps are replaced. Its connect, a blocking ``socket.create_connection``
that would stall every runtime of the loop (the loop connects the socket and hands it
over). Its reading: paho asks the socket for one byte (the packet type), then one per byte
of the remaining length, then the rest, and once more to learn that nothing is left: four
or five ``recv`` calls and a BlockingIOError per packet (paho's reading was 7% of a fleet
host's CPU); here one ``recv`` of up to ``RECV_BYTES`` fills a buffer that paho's reads
are served from, and ``buffered`` tells the loop that bytes are held that the socket will
not signal again; ``socket_unread`` tells it that the socket itself holds more, which
uvloop does not signal again after a poll error such as the peer's reset. And its decoding
of a PUBACK of MQTT 3.1.1, which builds an MQTT 5 reason code and property set for every
two-byte acknowledgement (30 us each, measured under load 11; a cluster controller's host
profile showed paho's handling of one received PUBACK at 4.7% of the process's CPU). Every
other packet, and every other protocol version, is paho's.
"""

from __future__ import annotations

import socket
from typing import Literal, NamedTuple

import paho.mqtt.client as paho
from paho.mqtt.enums import MQTTErrorCode
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

# What paho's decoder makes of every 3.1.1 PUBACK: success, no properties (handed to
# on_publish, which reads neither).
_PUBACK_SUCCESS = ReasonCode(PacketTypes.PUBACK)
_NO_PROPERTIES = Properties(PacketTypes.PUBACK)
RECV_BYTES = 65536


class Delivery(NamedTuple):
    """A received PUBLISH as paho handed it over: its packet id and the QoS it arrived at.

    Only a QoS 1 or 2 delivery is acknowledged (PUBACK, PUBCOMP). A QoS 0 PUBLISH has no
    packet id (paho reports 0): a PUBACK for it is a protocol error, for which Mosquitto
    closes the connection."""

    mid: int
    qos: int

    @property
    def acknowledged(self) -> bool:
        return self.qos in (1, 2)


class LoopClient(paho.Client):
    connected_socket: socket.socket | None = None  # what the next reconnect() uses
    _received = b""  # read from the socket, not yet handed to paho's decoder
    _received_at = 0

    @property
    def buffered(self) -> bool:
        """Whether bytes read from the socket wait for paho's decoder."""
        return self._received_at < len(self._received)

    def socket_unread(self) -> bool:
        """Whether a read of the socket would not block: it holds bytes, its end or an error."""
        sock = self._sock
        if sock is None:
            return False
        try:
            sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return False
        except OSError:
            return True  # a reset or another error: the next read reports it
        return True

    def _sock_recv(self, bufsize: int) -> bytes:
        start = self._received_at
        if start >= len(self._received):
            data = super()._sock_recv(RECV_BYTES)  # paho's errors (EAGAIN, SSL, closed)
            if len(data) <= bufsize:
                self._received, self._received_at = b"", 0
                return data  # the common case for a packet's payload: no copy kept
            self._received, start = data, 0
        end = start + bufsize
        self._received_at = end
        return self._received[start:end]

    def _sock_close(self) -> None:
        # What a closed connection left unread belongs to no later one.
        self._received, self._received_at = b"", 0
        super()._sock_close()

    def _create_socket_connection(self) -> socket.socket:
        sock, self.connected_socket = self.connected_socket, None
        if sock is None:
            raise ConnectionError("no connected socket")  # reconnect() is only called with one
        return sock

    def _handle_pubackcomp(self, cmd: Literal["PUBACK", "PUBCOMP"]) -> MQTTErrorCode:
        packet = self._in_packet["packet"]
        if cmd != "PUBACK" or self._protocol != paho.MQTTv311 or len(packet) != 2:
            return super()._handle_pubackcomp(cmd)  # paho decodes it, and refuses a bad one
        mid = int.from_bytes(packet, "big")
        with self._out_message_mutex:
            if mid in self._out_messages:  # once per message, as paho does
                return self._do_on_publish(mid, _PUBACK_SUCCESS, _NO_PROPERTIES)
        return MQTTErrorCode.MQTT_ERR_SUCCESS
