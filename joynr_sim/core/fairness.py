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
- of the trace: once ``traced_drops`` of a sender's received messages were dropped (for
  any reason: past a share, expired, duplicates, ...) within a window of ``window_ms``,
  every further message it sends this runtime in that window is refused with reason
  ``sender-limit`` and counted, not traced; one ``msg.drop`` line with ``count`` sums them
  up when the window closes.

A message past its sender's share is dropped with reason ``sender-limit`` before it is
received (no ``msg.in``, no reply-to route learned, nothing queued or looked up), so a
flood costs a decode and two dictionary lookups per message, and everyone else's calls go
on.
A sender that forges a new participant id for every message is bounded only by the
queue's own bounds; that is the limit of what a frame tells.
"""

from __future__ import annotations

from .actions import Drop

DEFAULT_MAX_LOOKUPS_PER_SENDER = 16
DEFAULT_TRACED_DROPS_PER_SENDER = 1_000
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
    def muted(self, sender: str, now_ms: int) -> bool:
        """Whether ``sender``'s received messages were dropped ``traced_drops`` times in its
        window: until the window closes, each further one is refused and counted only."""
        window = self._windows.get(sender)
        return window is not None and window[1] >= self.traced_drops and now_ms - window[0] < self.window_ms

    def note(self, sender: str, now_ms: int, actions: list) -> list:
        """Count the drops among what a received message of ``sender`` led to; a window of
        the sender that closed is summed up first. Returns ``actions``, after any summary."""
        dropped = sum(1 for a in actions if type(a) is Drop)
        if not dropped:
            return actions
        summary = self._close(sender, now_ms)
        window = self._windows.setdefault(sender, [now_ms, 0, 0])
        window[1] += dropped
        return summary + actions if summary else actions

    def count(self, sender: str) -> None:
        """A message of a muted sender, refused and counted, not traced."""
        self._windows[sender][2] += 1

    def advance(self, now_ms: int) -> list[Drop]:
        """Sum up every window that closed by ``now_ms``."""
        actions: list[Drop] = []
        for sender in [s for s, w in self._windows.items() if now_ms - w[0] >= self.window_ms]:
            actions.extend(self._close(sender, now_ms))
        return actions

    def flush(self) -> list[Drop]:
        """Sum up every window now, closed or not: the runtime stops."""
        actions: list[Drop] = []
        for sender in list(self._windows):
            actions.extend(self._close(sender, None))
        return actions

    def _close(self, sender: str, now_ms: int | None) -> list[Drop]:
        window = self._windows.get(sender)
        if window is None or (now_ms is not None and now_ms - window[0] < self.window_ms):
            return []
        del self._windows[sender]
        if not window[2]:
            return []
        return [Drop(
            None, "sender-limit", sender=sender, count=window[2],
            detail=f"{window[2]} more messages of sender {sender!r}, which had {window[1]} dropped "
                   f"within {self.window_ms} ms, not traced one by one",
        )]
