"""Messages waiting for a route: per participant, in arrival order, within bounds.

A message for a participant without a routing entry waits here until a route appears or
it expires. The bounds (messages and payload bytes) keep a flood of messages for
participants nobody knows from growing a runtime without end: past them the oldest
waiting message makes room. Each message is kept with the transport it arrived over,
which decides where it may go once its route appears.
"""

from __future__ import annotations

from collections import OrderedDict

from .message import JoynrMessage


class WaitingMessages:
    def __init__(self, max_messages: int, max_bytes: int) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        # Arrival order across participants (the oldest is found at once) and, per
        # participant, the keys of its own messages in the same order.
        self._messages: OrderedDict[int, tuple[JoynrMessage, str]] = OrderedDict()
        self._by_participant: dict[str, list[int]] = {}
        self._next_key = 0
        self.bytes = 0

    def fits(self, msg: JoynrMessage) -> bool:
        """Whether the message could wait here at all (with everything else made room for)."""
        return self.max_messages > 0 and len(msg.payload) <= self.max_bytes

    def add(self, msg: JoynrMessage, via: str) -> list[JoynrMessage]:
        """Let ``msg`` wait; returns the oldest messages that had to make room for it."""
        size = len(msg.payload)
        evicted = []
        while self._messages and (len(self._messages) >= self.max_messages or self.bytes + size > self.max_bytes):
            key = next(iter(self._messages))
            evicted.append(self._forget(key))
        key = self._next_key
        self._next_key += 1
        self._messages[key] = (msg, via)
        self._by_participant.setdefault(msg.recipient, []).append(key)
        self.bytes += size
        return evicted

    def pop(self, participant_id: str) -> list[tuple[JoynrMessage, str]]:
        """Every message waiting for the participant, in arrival order, with its transport."""
        taken = []
        for key in self._by_participant.pop(participant_id, []):
            msg, via = self._messages.pop(key)
            self.bytes -= len(msg.payload)
            taken.append((msg, via))
        return taken

    def expire(self, now_ms: int) -> list[JoynrMessage]:
        """Take out and return the messages whose expiry lies before ``now_ms``."""
        expired = [k for k, (m, _) in self._messages.items() if m.expiry_date_ms < now_ms]
        return [self._forget(key) for key in expired]

    def count(self, participant_id: str | None = None) -> int:
        if participant_id is not None:
            return len(self._by_participant.get(participant_id, ()))
        return len(self._messages)

    def _forget(self, key: int) -> JoynrMessage:
        msg, _ = self._messages.pop(key)
        self.bytes -= len(msg.payload)
        keys = self._by_participant[msg.recipient]
        keys.remove(key)
        if not keys:
            del self._by_participant[msg.recipient]
        return msg
