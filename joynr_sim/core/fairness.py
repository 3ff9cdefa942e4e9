"""Each sender's share of what a message for an unknown participant costs a runtime.

A message whose recipient has no route waits in the runtime's queue and makes the runtime
ask discovery for the recipient. Both are bounded as a whole (``WaitingMessages``), but a
bound for the whole lets one sender take all of it: a client publishing tens of thousands
of valid requests for participants nobody knows filled the queue, made the cluster
controller look up every recipient in the GCD and wrote a trace line or three per message,
and the calls of everyone else waited behind that work until they expired.

So each sender (the message's ``sender`` participant id, the only identity a frame from a
broker carries: MQTT 3.1.1 does not tell a subscriber who published) gets a share:

- of the waiting queue: ``WaitingMessages.max_per_sender`` messages;
- of discovery lookups: ``max_lookups`` lookups under way at once that its messages
  started;
- of the trace: ``traced_drops`` ``sender-limit`` drops traced one by one per window of
  ``window_ms``; the rest of the window is one line that counts them.

A message past its sender's share is dropped with reason ``sender-limit`` before it is
received (no ``msg.in``, no reply-to route learned, nothing queued or looked up), so the
flood costs a decode and a dictionary lookup per message, and everyone else's calls go on.
A sender that forges a new participant id for every message is bounded only by the
queue's own bounds; that is the limit of what a frame tells.
"""

from __future__ import annotations

from .actions import Drop
from .message import JoynrMessage

DEFAULT_MAX_LOOKUPS_PER_SENDER = 16
DEFAULT_TRACED_DROPS_PER_SENDER = 100
DEFAULT_WINDOW_MS = 10_000


class SenderShares:
    def __init__(
        self,
        *,
        max_lookups: int = DEFAULT_MAX_LOOKUPS_PER_SENDER,
        traced_drops: int = DEFAULT_TRACED_DROPS_PER_SENDER,
        window_ms: int = DEFAULT_WINDOW_MS,
    ) -> None:
        if max_lookups < 1:
            raise ValueError(f"max_lookups_per_sender: at least 1, got {max_lookups}")
        self.max_lookups = max_lookups
        self.traced_drops = traced_drops
        self.window_ms = window_ms
        self._lookups: dict[str, int] = {}
        # Per sender: when its window began, drops traced in it, drops counted only.
        self._windows: dict[str, list[int]] = {}

    # -- discovery lookups -------------------------------------------------------------
    def lookups_full(self, sender: str) -> bool:
        return self._lookups.get(sender, 0) >= self.max_lookups

    def lookup_started(self, sender: str) -> None:
        self._lookups[sender] = self._lookups.get(sender, 0) + 1

    def lookup_ended(self, sender: str) -> None:
        left = self._lookups.get(sender, 0) - 1
        if left > 0:
            self._lookups[sender] = left
        else:
            self._lookups.pop(sender, None)

    def lookups(self, sender: str) -> int:
        return self._lookups.get(sender, 0)

    # -- trace volume ------------------------------------------------------------------
    def drop(self, msg: JoynrMessage, now_ms: int, detail: str) -> list[Drop]:
        """The ``sender-limit`` drop of ``msg``: traced while the sender's window has room,
        else counted; a window that closed with counted drops is summed up first."""
        actions = self._close(msg.sender, now_ms)
        window = self._windows.setdefault(msg.sender, [now_ms, 0, 0])
        if window[1] < self.traced_drops:
            window[1] += 1
            actions.append(Drop(msg, "sender-limit", detail=detail))
        else:
            window[2] += 1
        return actions

    def advance(self, now_ms: int) -> list[Drop]:
        """Sum up every window that closed by ``now_ms``."""
        actions: list[Drop] = []
        for sender in [s for s, w in self._windows.items() if now_ms - w[0] >= self.window_ms]:
            actions.extend(self._close(sender, now_ms))
        return actions

    def _close(self, sender: str, now_ms: int) -> list[Drop]:
        window = self._windows.get(sender)
        if window is None or now_ms - window[0] < self.window_ms:
            return []
        del self._windows[sender]
        if not window[2]:
            return []
        return [Drop(
            None, "sender-limit", sender=sender, count=window[2],
            detail=f"{window[2]} more messages of sender {sender!r} past its share, not traced one by one",
        )]
