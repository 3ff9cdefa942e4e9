"""The broker semantics suite's properties of a session: what a broker keeps of a
persistent session while its client is away, crashed, taken over or the broker restarted,
and what it discards of a clean one. Each check is a few lines of MQTT exchange on the
clients of ``brokers.semantics_client``; ``brokers.semantics`` runs them by property id.

Separate from the delivery properties (``brokers.semantics_delivery``): these reconnect a
client (or restart the broker) and judge what the session held; those judge what reaches
whom on connections that stay up.
"""

from __future__ import annotations

import time

from .promises import Outcome
from .semantics_client import QUIET_S, WAIT_S, NotKept, Session, distinct, unicast

QUEUED = 3  # offline-queue: messages published while the subscriber is away


def qos1_redelivery(s: Session) -> Outcome:
    sub = s.subscriber("sub", manual_ack=True)
    pub = s.client("pub")
    pub.publish(unicast(sub), b"owed")
    first = sub.receive()
    if first is None:
        raise NotKept(f"no message within {WAIT_S:g} s (before the client's kill)")
    sub.crash()  # the message stays unacknowledged
    again = s.client("sub", clean_session=False)
    present = again.session_present
    msg = again.receive()
    if msg is None:
        raise NotKept(f"no message within {WAIT_S:g} s of the reconnect (session present {int(bool(present))})")
    if msg.payload != b"owed":
        raise NotKept(f"another message came instead: {msg.payload[:40]!r}")
    return Outcome(True, f"DUP={int(msg.dup)}")


def offline_queue(s: Session) -> Outcome:
    sub = s.subscriber("sub")
    sub.disconnect()
    pub = s.client("pub")
    for i in range(QUEUED):
        if not pub.acked(pub.publish(unicast(sub), f"queued-{i}".encode(), wait=False)):
            raise NotKept(f"no PUBACK for queued-{i} within {WAIT_S:g} s")
    back = s.client("sub", clean_session=False)
    got = distinct(back, QUEUED)
    if not back.session_present:
        raise NotKept(f"session present 0, {len(got)} of {QUEUED} delivered")
    if len(got) < QUEUED:
        raise NotKept(f"{len(got)} of {QUEUED} delivered within {WAIT_S:g} s, session present 1")
    return Outcome(True, f"{QUEUED} of {QUEUED}, session present 1")


def clean_session_discards(s: Session) -> Outcome:
    sub = s.subscriber("sub")
    sub.disconnect()
    pub = s.client("pub")
    pub.publish(unicast(sub), b"queued")
    clean = s.client("sub", clean_session=True)
    if clean.session_present:
        raise NotKept("session present 1 on a clean-session connect")
    clean.subscribe(f"{clean.client_id}/#")
    pub.publish(unicast(sub), b"marker")
    stale = [m for m in clean.receive_until(b"marker") if m.payload == b"queued"]
    if stale:
        raise NotKept("the message queued for the old session was delivered")
    clean.disconnect()
    after = s.client("sub", clean_session=False)  # the clean session ended with its connection
    if after.session_present:
        raise NotKept("the clean session outlived its connection (session present 1 on the next connect)")
    return Outcome(True, "session present 0, nothing delivered")


def takeover(s: Session) -> Outcome:
    old = s.subscriber("sub")
    new = s.client("sub", clean_session=False)
    if not old.gone.wait(WAIT_S):
        raise NotKept(f"the old connection was not closed within {WAIT_S:g} s")
    pub = s.client("pub")
    pub.publish(unicast(new), b"after-takeover")
    msg = new.receive()
    if msg is None:
        raise NotKept(f"the new connection received nothing within {WAIT_S:g} s "
                      f"(session present {int(bool(new.session_present))})")
    return Outcome(True, "old connection closed, new one receives")


def persistence(s: Session) -> Outcome:
    assert s.target.restart is not None
    sub = s.subscriber("sub")
    sub.disconnect()
    pub = s.client("pub")
    pub.publish(unicast(sub), b"kept")
    pub.disconnect()
    # Mosquitto saves at the end of the loop pass that acknowledged the message: a SIGKILL
    # within that pass (a few ms) loses it even at autosave 1, so the crash comes a little later.
    time.sleep(QUIET_S)
    s.target.restart()
    back = s.client("sub", clean_session=False)
    msg = back.receive(WAIT_S if back.session_present else QUIET_S)
    if not back.session_present:
        raise NotKept("session present 0 after the restart")
    if msg is None:
        raise NotKept(f"session kept, the queued message not delivered within {WAIT_S:g} s")
    return Outcome(True, "session and message kept")
