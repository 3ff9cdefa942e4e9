"""A cluster controller's WebSocket server as a port of its runtime: it carries what is sent
to a WebSocketClientAddress (a libjoynr runtime of this cluster controller), hands every
frame a client sends to the runtime's node, and tells the node when a client went.

A frame goes out where a task spawned now would take its first step (``Runtime.soon``):
after what this loop turn already scheduled, such as its trace write, and not at all if
the runtime halts first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.actions import Drop
from ..core.address import WebSocketClientAddress
from ..core.message import JoynrMessage
from ..transport.network import REAL
from ..transport.websocket import WebSocketServer
from ..wire.codecs import WireEncodeError
from .ports import Carrier, Port

if TYPE_CHECKING:
    from .cluster_controller import ClusterController


class WebSocketServerPort(Port):
    def __init__(self, cc: ClusterController, authenticate: Callable[[str, object], bool],
                 drain_timeout_s: float) -> None:
        self.cc = cc
        self.authenticate = authenticate
        self.drain_timeout_s = drain_timeout_s
        self.server: WebSocketServer | Any = None  # or the memory network's
        self.carriers: dict[type, Carrier] = {WebSocketClientAddress: self._send_soon}

    async def start(self) -> None:
        cc = self.cc
        self.server = (cc.network or REAL).websocket_server(
            on_frame=lambda client, frame: cc.receive_frame(frame, "ws", source=client),
            on_client=lambda client: None,
            on_client_gone=lambda client: cc.carry_out(cc.node.connection_lost(client)),
            on_bad_handshake=lambda reason, detail: cc.carry_out([Drop(None, reason, via="ws", detail=detail)]),
            authenticate=self.authenticate,
        )
        # A restarted cluster controller listens where its libjoynr runtimes expect it.
        await self.server.start(host=cc.ws_host, port=cc.ws_port)
        cc.ws_port = self.server.port
        cc.life_fields["ws_port"] = cc.ws_port

    async def drain(self) -> None:
        """Each libjoynr runtime gets its queued frames, then the closing handshake, and
        what it sent until then is routed; at most the drain timeout."""
        await asyncio.sleep(0)  # what this turn scheduled for a WebSocket is queued first
        if self.server is not None:
            await self.server.drain(self.drain_timeout_s)

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()

    async def abort(self) -> None:
        if self.server is not None:
            self.server.abort()

    def _send_soon(self, msg: JoynrMessage, address: WebSocketClientAddress) -> None:
        self.cc.soon(self._send, msg, address)

    def _send(self, msg: JoynrMessage, address: WebSocketClientAddress) -> None:
        cc = self.cc
        assert self.server is not None
        try:
            frame = cc.codec.encode(msg)
        except WireEncodeError as exc:  # a message joynr's JSON cannot carry: as unsendable
            cc.log_failure(f"message {msg.id} not sent", exc)
            cc.carry_out(cc.node.send_failed(msg, address))
            return
        self.server.send_soon(address.id, frame, lambda: cc.carry_out(cc.node.send_failed(msg, address)))
