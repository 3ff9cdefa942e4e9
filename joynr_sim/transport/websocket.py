"""WebSocket transport between libjoynr runtimes and their cluster controller (websockets):
the protocol both ends keep, its limits, and the two ends by their public names.

The cluster controller is the server. The first frame a client sends is its
``WebSocketClientAddress`` in joynr's JSON form, with one field joynr does not have: the
``token`` the simulation handed that runtime, so no other local client can take its id and
its replies. Every later frame is a binary msgpack message. Text frames after the
handshake and undecodable frames are the receiver's business (it traces them as
``decode-error``); the transport only moves bytes, and a receiver that raises never ends
the reading loop.

Frames are bounded: a frame over ``MAX_WEBSOCKET_FRAME_BYTES`` closes the connection
(websockets' own limit, code 1009); the receiver drops frames over its configured maximum
frame size below that. Until the server accepted a client's first frame, the limit is
``MAX_HANDSHAKE_BYTES``, and the first frame must arrive within ``HANDSHAKE_TIMEOUT_S``. A
server that refuses the first frame closes with ``REFUSED`` (1008) before it hands any
frame on; the client sends again, first, on its next connection what it sent on the
refused one.

Frames are read the direct way (``ws_direct``): a binary frame goes to the receiver within
the socket read that completed it, without websockets' per-frame future and reading-task
turn; on the server only once it accepted the client's first frame. Frames that arrived
before, text frames and fragmented messages go through each connection's reading task, and
nothing overtakes them. That task still ends on close, which is what ``drain`` and the
client's reconnection wait for.

The parts, each kept apart because it holds state or rules of its own:

  websocket    this protocol: its limits, the refusal code, the receiver's guard
  ws_server    ``WebSocketServer``: the cluster controller's end, judging first frames
  ws_client    ``WebSocketClient``: a runtime's end, sending again what a refusal lost
  ws_outgoing  one connection's outgoing frames in order (``send_soon`` of both ends)
  ws_direct    websockets' connections with the direct way in

Both ends read the limits below from this module when they use them, so a limit set here
(as tests and fuzzing do) holds for both.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .ws_client import WebSocketClient
    from .ws_server import WebSocketServer

__all__ = [
    "HANDSHAKE_TIMEOUT_S",
    "MAX_HANDSHAKE_BYTES",
    "MAX_UNCONFIRMED_BYTES",
    "MAX_UNCONFIRMED_FRAMES",
    "MAX_WEBSOCKET_FRAME_BYTES",
    "OPEN_TIMEOUT_S",
    "REFUSED",
    "WebSocketClient",
    "WebSocketServer",
    "guarded",
]

# websockets' own default: how long a client waits for the opening handshake's answer.
OPEN_TIMEOUT_S = 10.0

HANDSHAKE_TIMEOUT_S = 5
REFUSED = 1008  # the close code of a connection whose first frame the server did not accept
# What a client keeps, per connection, until the server shows it accepted the connection;
# beyond either bound it keeps nothing more for that connection.
MAX_UNCONFIRMED_FRAMES = 1024
MAX_UNCONFIRMED_BYTES = 4 * 1024 * 1024
MAX_WEBSOCKET_FRAME_BYTES = 16 * 1024 * 1024
MAX_HANDSHAKE_BYTES = 4096
_log = logging.getLogger(__name__)


def guarded(callback: Callable[..., object], *args: object) -> None:
    """Run a receiver's callback; its failure is logged, never the end of the connection."""
    try:
        callback(*args)
    except Exception:
        _log.exception("receiver of a WebSocket frame failed")


def __getattr__(name: str) -> object:
    """``WebSocketServer`` and ``WebSocketClient``, imported on first use: their modules
    import this one for the limits, so importing them at the top here would make each
    module wait for the other."""
    if name == "WebSocketServer":
        from .ws_server import WebSocketServer as end
    elif name == "WebSocketClient":
        from .ws_client import WebSocketClient as end
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = end
    return end
