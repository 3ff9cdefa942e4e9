"""Where a runtime's connections come from: the real network (paho to a broker, websockets
over TCP) or the memory network (``joynr_sim.network.memory``). A runtime asks its
``Network`` for each connection it makes; everything else about a runtime is the same on
either. The interface is ``runtime.ports.Network``.
"""

from __future__ import annotations

from typing import Any

from .mqtt import MqttConnection
from .ws_client import WebSocketClient
from .ws_server import WebSocketServer


class RealNetwork:
    """Sockets: MQTT through paho, WebSockets through websockets."""

    name = "real"

    def mqtt_connection(self, *, runtime_id: str, gbid: str, **kwargs: Any) -> MqttConnection:
        return MqttConnection(gbid=gbid, **kwargs)

    def websocket_server(self, **kwargs: Any) -> WebSocketServer:
        return WebSocketServer(**kwargs)

    def websocket_client(self, url: str, client_id: str, **kwargs: Any) -> WebSocketClient:
        return WebSocketClient(url, client_id, **kwargs)


REAL = RealNetwork()
