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

A server's connection can also judge its client's first message within the read that
parsed it (``on_first``): until then its ``max_size`` is ``first_max_size``, so websockets
refuses a larger first frame from its header (1009) without buffering its payload, and
``on_first`` may raise the limit before the header of the frame behind it is parsed (a
client sends its frames right after its first one, often in the same read).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.messages import Assembler
from websockets.asyncio.server import ServerConnection
from websockets.frames import Frame, Opcode
from websockets.protocol import Event

OnData = Callable[[bytes], None]
_DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)


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
    """A server's connection; ``on_data`` is None until the server accepted its client.

    With ``on_first``, frames are bounded by ``first_max_size`` until the first message is
    complete; ``on_first(connection, message)`` then runs within the same read, and may set
    ``protocol.max_size`` for the frames after it. A first message in fragments, or a text
    one that is not UTF-8, is not handed to ``on_first``: the server judges what its reader
    makes of it, and the limit stays until the server raises it.
    """

    verdict: object = None  # what the server made of the first message

    def __init__(self, *args: Any, on_first: Callable[[DirectServerConnection, bytes | str], None] | None = None,
                 first_max_size: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._on_first = on_first
        if on_first is not None:
            limit = self.protocol.max_size
            if first_max_size is not None:
                self.protocol.max_size = first_max_size if limit is None else min(limit, first_max_size)
            # The sans-I/O parser calls recv_frame for each frame, right before it reads
            # the next frame's header with the max_size of that moment.
            self.protocol.recv_frame = self._recv_first  # type: ignore[method-assign]

    def _recv_first(self, frame: Frame) -> None:
        protocol = self.protocol
        type(protocol).recv_frame(protocol, frame)
        if frame.opcode not in _DATA:
            return  # a control frame: the first message is still to come
        del protocol.recv_frame  # the first data frame: every later one goes the usual way
        if not frame.fin or frame.opcode is Opcode.CONT:
            return
        data = bytes(frame.data)
        try:
            message: bytes | str = data.decode() if frame.opcode is Opcode.TEXT else data
        except UnicodeDecodeError:
            return  # the reader refuses it (1007)
        assert self._on_first is not None
        self._on_first(self, message)


class DirectClientConnection(_Direct, ClientConnection):
    """A client's connection; ``on_data`` is None until the client set it."""
