"""Messages waiting for a route: per participant, in arrival order, within bounds.

A message for a participant without a routing entry waits here until a route appears or
it expires. The bounds (messages, and payload bytes as the message holds them: a relayed
call's body is its wire's, ``JoynrMessage.payload_form``) keep a flood of messages for
participants nobody knows from growing a runtime without end: past them the oldest
waiting message makes room. Each sender may hold at most ``max_per_sender`` of the
messages (``fairness``), so one sender's flood cannot make room by evicting everyone
else's. Each message is kept with the transport it arrived over, which decides where it
may go once its route appears.
"""

from __future__ import annotations

from collections import OrderedDict

from .message import JoynrMessage


class WaitingMessages:
    def __init__(self, max_messages: int, max_bytes: int, max_per_sender: int | None = None) -> None:
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        # A quarter of the queue by default: three senders' floods still leave room.
        self.max_per_sender = max(1, max_messages // 4) if max_per_sender is None else max_per_sender
        if self.max_per_sender < 1:
            raise ValueError(f"max_queued_per_sender: at least 1, got {self.max_per_sender}")
        self._by_sender: dict[str, int] = {}
        # Arrival order across participants (the oldest is found at once) and, per
        # participant, the keys of its own messages in the same order.
        self._messages: OrderedDict[int, tuple[JoynrMessage, str]] = OrderedDict()
        self._by_participant: dict[str, list[int]] = {}
        self._next_key = 0
        self.bytes = 0

    def fits(self, msg: JoynrMessage) -> bool:
        """Whether the message could wait here at all (with everything else made room for)."""
        return self.max_messages > 0 and len(msg.payload) <= self.max_bytes

    def sender_full(self, sender: str) -> bool:
        """Whether ``sender`` holds its whole share of the queue."""
        return self._by_sender.get(sender, 0) >= self.max_per_sender

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
        self._by_sender[msg.sender] = self._by_sender.get(msg.sender, 0) + 1
        self.bytes += size
        return evicted

    def pop(self, participant_id: str) -> list[tuple[JoynrMessage, str]]:
        """Every message waiting for the participant, in arrival order, with its transport."""
        taken = []
        for key in self._by_participant.pop(participant_id, []):
            msg, via = self._messages.pop(key)
            self.bytes -= len(msg.payload)
            self._sender_left(msg.sender)
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
        self._sender_left(msg.sender)
        keys = self._by_participant[msg.recipient]
        keys.remove(key)
        if not keys:
            del self._by_participant[msg.recipient]
        return msg

    def _sender_left(self, sender: str) -> None:
        left = self._by_sender[sender] - 1
        if left:
            self._by_sender[sender] = left
        else:
            del self._by_sender[sender]

    def held_by(self, sender: str) -> int:
        return self._by_sender.get(sender, 0)
