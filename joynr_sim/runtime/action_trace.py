"""The one place a message's trace events are written: each is derived from an action of the
runtime's node (``joynr_sim.core.actions``), never written by a transport or a handler on
its own, so the trace the checks treat as the truth says exactly what was decided.

    Send      msg.out      Deliver   msg.deliver     Received  msg.in
    Drop      msg.drop     Queue     msg.queue       Withhold  mc.withhold

The other actions leave no event of their own: what they lead to does (a Resolve's lookup,
a Subscribe's ``mc.subscribe`` with the topic the broker was asked for, a LearnRoute's put,
which the routing table's listener traces).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.actions import Action, Deliver, Drop, Queue, Received, Send, Withhold
from ..core.address import describe, type_name
from ..core.message import REQUEST_REPLY_ID, JoynrMessage
from ..trace import TraceWriter

_NO_MESSAGE = {"msg": None, "type": None, "to": None, "hops": None, "corr": None, "exp": None}


def message_fields(msg: JoynrMessage | None, sender: str | None = None) -> dict[str, Any]:
    """What every message event says of its message; for an event of no one message (a
    count of a sender's messages), ``sender`` is its ``from``."""
    if msg is None:
        return {**_NO_MESSAGE, "from": sender}
    return {
        "msg": msg.id,
        "type": msg.type,
        "from": msg.sender,
        "to": msg.recipient,
        "hops": msg.hops,
        "corr": msg.header(REQUEST_REPLY_ID),
        "exp": msg.expiry_date_ms,  # what a check needs to know whether it could still arrive
    }


def _send(trace: TraceWriter, a: Send) -> None:
    trace.emit("msg.out", **message_fields(a.msg), via=a.via, addr_type=type_name(a.address),
               target=describe(a.address), gbid=a.gbid, resent=a.resent)


def _deliver(trace: TraceWriter, a: Deliver) -> None:
    trace.emit("msg.deliver", **message_fields(a.msg))


def _received(trace: TraceWriter, a: Received) -> None:
    trace.emit("msg.in", **message_fields(a.msg), via=a.via, gbid=a.gbid)


def _drop(trace: TraceWriter, a: Drop) -> None:
    extra = {k: v for k, v in (("via", a.via), ("gbid", a.gbid), ("detail", a.detail), ("field", a.field),
                               ("count", a.count), ("now", a.now)) if v is not None}
    trace.emit("msg.drop", **message_fields(a.msg, a.sender), reason=a.reason, **extra)


def _queue(trace: TraceWriter, a: Queue) -> None:
    trace.emit("msg.queue", **message_fields(a.msg), reason=a.reason)


def _withhold(trace: TraceWriter, a: Withhold) -> None:
    trace.emit("mc.withhold", msg=a.msg.id, multicast=a.msg.recipient, reason=a.reason)


# One dict lookup by the action's exact type (the actions are final dataclasses), not a
# chain of isinstance tests: the fleet's profile counted five a call.
EVENT_OF: dict[type, Callable[[TraceWriter, Any], None]] = {
    Send: _send, Deliver: _deliver, Received: _received, Drop: _drop, Queue: _queue, Withhold: _withhold,
}


def trace_action(trace: TraceWriter, action: Action) -> None:
    """Write the event of ``action``, if it has one."""
    write = EVENT_OF.get(type(action))
    if write is not None:
        write(trace, action)
