"""websockets' connections with a direct way in: each complete binary frame goes to the
connection's ``on_data`` within ``data_received``, once a receiver has set one.

websockets' asyncio layer puts every data frame into its Assembler, resolves a future, and
hands the frame on in the reading task's next turn; for joynr's small single-frame
messages that layer (the future, the task's wake-up, the handles) cost more CPU per frame
than parsing it. The sans-I/O protocol still parses every frame and keeps its limits
(``max_size``: a frame over it closes the connection with 1009), control frames and the
closing handshake; only the step from a parsed frame to the receiver is shorter.

The order of frames is kept: a frame goes the direct way only when nothing waits in the
Assembler before it (frames that arrived before ``on_data`` was set, or one a reading task
has not taken yet). Text frames and fragmented messages always go the Assembler's way, so
websockets still checks a text frame's UTF-8 (1007) and joins fragments; the connection's
reading task hands them on, and any frame that arrives while they wait queues behind them.
"""

from __future__ import annotations

from collections.abc import Callable

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.messages import Assembler
from websockets.asyncio.server import ServerConnection
from websockets.frames import Frame, Opcode
from websockets.protocol import Event

OnData = Callable[[bytes], None]


class _Direct:
    """``process_event`` of both connection classes (before theirs in the MRO)."""

    on_data: OnData | None = None  # None: every frame goes websockets' way
    recv_messages: Assembler

    def process_event(self, event: Event) -> None:
        on_data = self.on_data
        if (on_data is not None and type(event) is Frame and event.opcode is Opcode.BINARY and event.fin
                and not self.recv_messages.frames.queue):
            data = event.data
            on_data(data if type(data) is bytes else bytes(data))
        else:
            super().process_event(event)  # type: ignore[misc]


class DirectServerConnection(_Direct, ServerConnection):
    """A server's connection; ``on_data`` is None until the server accepted its client."""


class DirectClientConnection(_Direct, ClientConnection):
    """A client's connection; ``on_data`` is None until the client set it."""
