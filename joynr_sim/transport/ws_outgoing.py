"""One WebSocket connection's outgoing frames, in the order they were handed over; both
ends send through it (``send_soon`` of ``WebSocketServer`` and ``WebSocketClient``).

A frame is written within the call when its connection can take it now (open, not paused
by flow control, nothing queued before it), without the asyncio task that each
``await ws.send`` from a callback needed (a task per frame was about half of websockets'
share of a fleet host's CPU). Otherwise the frame waits in the connection's queue, which
one task empties through ``ws.send`` and its flow control, so frames leave in the order of
the calls and a paused connection still holds back its senders' frames as before.

Kept apart from the two ends because it knows nothing of the protocol on top (the first
frame, its refusal): only websockets' connection and its flow control.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from .websocket import guarded


def write_now(ws: ClientConnection | ServerConnection, data: bytes) -> bool | None:
    """A binary frame written within this call, as ``ws.send`` writes it before it awaits
    flow control: True once written, False when the socket failed (the connection is
    aborted, as ``ws.send`` would), None when the connection cannot take it now."""
    if (ws.protocol.state is not State.OPEN or ws.fragmented_send_waiter is not None
            or ws.paused or ws.transport.is_closing()):
        return None
    ws.protocol.send_binary(data)
    try:
        ws.send_data()
    except Exception:
        ws.transport.abort()
        return False
    return True


class Outgoing:
    """One connection's frames in order: written at once while it can take them, else
    queued behind one task that awaits websockets' flow control for each."""

    def __init__(self, ws: ClientConnection | ServerConnection) -> None:
        self.ws = ws
        self._queue: deque[tuple[bytes, Callable[[], None]]] = deque()
        self._task: asyncio.Task | None = None

    def send(self, data: bytes, on_failed: Callable[[], None]) -> None:
        if not self._queue:
            written = write_now(self.ws, data)
            if written is not None:
                if not written:
                    guarded(on_failed)
                return
        self._queue.append((data, on_failed))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._empty())

    async def _empty(self) -> None:
        try:
            while self._queue:
                data, on_failed = self._queue[0]
                try:
                    await self.ws.send(data)
                except ConnectionClosed:
                    guarded(on_failed)
                self._queue.popleft()
        finally:
            self._task = None

    async def flushed(self) -> None:
        """Until every frame handed over so far is written (or failed)."""
        while self._task is not None:
            await asyncio.shield(self._task)

    def cancel(self) -> None:
        """A crash: what is queued is lost with the process's memory."""
        self._queue.clear()
        if self._task is not None:
            self._task.cancel()
