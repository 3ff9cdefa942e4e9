"""Resuming a link: its unsettled deliveries reconciled with the peer's (AMQP 1.0 3.4.4)."""

from __future__ import annotations

from collections.abc import Mapping

from .model import TERMINAL_STATES, Delivery, Role


def reconcile(
    role: Role, local: Mapping[str, str | None], peer: Mapping[str, str | None]
) -> tuple[tuple[Delivery, ...], tuple[str, ...], tuple[str, ...], dict[str, str | None]]:
    """Reconcile the local unsettled map with the peer's on resume (AMQP 1.0 3.4.4).

    Returns (resend, settled, peer_only, still unsettled). On a sending link the peer is
    the receiver: a terminal state there settles the delivery without a resend, anything
    else (no state, received, unknown) is resent marked resumed. On a receiving link the
    peer is the sender: what it no longer knows it considers settled, so it is settled
    here too; what it still holds without a terminal state it resends.
    """
    resend: list[Delivery] = []
    settled: list[str] = []
    remaining: dict[str, str | None] = {}
    for tag in sorted(local):
        state = local[tag]
        if role == "sending":
            peer_state = peer.get(tag)
            if peer_state in TERMINAL_STATES:
                settled.append(tag)
            else:
                resend.append(Delivery(tag, state))
                remaining[tag] = state
        elif tag not in peer or peer[tag] in TERMINAL_STATES:
            settled.append(tag)
        else:
            resend.append(Delivery(tag, state))
            remaining[tag] = state
    peer_only = tuple(sorted(t for t in peer if t not in local))
    return tuple(resend), tuple(settled), peer_only, remaining


def restart_deliveries(
    role: Role, local: Mapping[str, str | None]
) -> tuple[tuple[Delivery, ...], tuple[str, ...], dict[str, str | None]]:
    """The local unsettled map when the peer kept no state of the link (it lost its
    terminus: the attach establishes the link anew, AMQP 1.0 2.6.13).

    Returns (resend, settled, still unsettled). On a sending link nothing is resumed:
    every unsettled delivery is sent again as a new one (not marked resumed, no state yet)
    and stays unsettled until the receiver settles it. On a receiving link the sender
    forgot them all and considers them settled, so they are settled here too (AMQP 1.0
    3.4.4: the receiver must consider settled what the sender considers settled).
    """
    if role == "sending":
        tags = sorted(local)
        return tuple(Delivery(tag, None, resumed=False) for tag in tags), (), dict.fromkeys(tags)
    return (), tuple(sorted(local)), {}
