"""The phases of the fuzz run at the door: clients that have no business with a runtime's
identity try it anyway.

CONNECTs (``connect_phase``), over a raw socket, one packet each: anonymous ones (no
username, under a client id of their own or a cluster controller's), and ones under
``cc2``'s client id with its username but no password, with a wrong password, and with the
fuzzer's own valid login. Each is refused (a CONNACK with a return code other than 0, or
the connection closed) or accepted. Accepted under a cluster controller's id with a valid
login is a takeover (MQTT lets a same-id CONNECT end the session's connection): then the
controller must notice (a ``link.detach`` that is not a close, or an attach again) and calls
must go through afterwards. Any other accepted CONNECT fails the run.

WebSocket connections to ``cc1`` that never show a valid token (``preauth_phase``): a first
frame of garbage text, one of 1 MiB, a claim of another runtime's id without a token and
with a wrong one, a binary first frame, and nothing at all (refused when the handshake's
time is up; all connections run at once, so that costs its few seconds once). Each must be
closed by the server (1008, or 1009 for the oversized frame) with one ``msg.drop`` in
``cc1``'s trace, and the consumer's own connection must stay as it was.

After each phase a call must go through, and neither controller may have lost its
connection (the harness counts ``link.attach`` and ``link.detach`` with ``closed: false``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from brokers.probe import connect_packet, probe

from ..core.address import WebSocketClientAddress, to_dict
from ..transport.websocket import HANDSHAKE_TIMEOUT_S, REFUSED
from .wires import valid_frame

if TYPE_CHECKING:
    from .harness import Fuzzer

CONNECT_TIMEOUT_S = 10.0
NOTICE_TIMEOUT_S = 10.0  # for a controller to notice a takeover, and for a refusal's trace line
CONTROLLERS = ("cc1", "cc2")
ANONYMOUS, NO_PASSWORD, WRONG_PASSWORD, OWN_LOGIN = (
    "anonymous", "as cc2, no password", "as cc2, wrong password", "as cc2, the fuzzer's login")
CONNECT_KINDS = (ANONYMOUS, NO_PASSWORD, WRONG_PASSWORD, OWN_LOGIN)
MIB = 1024 * 1024
TOO_BIG = 1009  # the close code of a first frame over the handshake's limit
REFUSALS = (REFUSED, TOO_BIG, 0)  # 0: the connection ended without a close frame
WS_KINDS = ("garbage text", "1 MiB first frame", "another's id, no token", "another's id, wrong token",
            "binary first frame", "nothing")


def _mqtt_string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack("!H", len(raw)) + raw


def unauthenticated_connect(client_id: str, username: str | None = None) -> bytes:
    """An MQTT 3.1.1 CONNECT with a clean session and no password; without ``username``,
    none either (``mosquitto_pub -i <id>``)."""
    flags = 0x02 | (0x80 if username is not None else 0)
    body = _mqtt_string("MQTT") + bytes([4, flags]) + struct.pack("!H", 10) + _mqtt_string(client_id)
    if username is not None:
        body += _mqtt_string(username)
    assert len(body) < 128  # one byte of remaining length
    return bytes([0x10, len(body)]) + body


@dataclass
class ConnectReport:
    tried: Counter = field(default_factory=Counter)  # kind -> CONNECTs
    refused: Counter = field(default_factory=Counter)  # kind -> a CONNACK code != 0 or the connection closed
    accepted: Counter = field(default_factory=Counter)
    codes: Counter = field(default_factory=Counter)  # "rc 5", "closed", ...
    takeovers: int = 0  # accepted under a controller's id with a valid login
    noticed: int = 0  # takeovers the controller noticed
    call_after: bool = False
    connected: bool = False  # both controllers' MQTT connections up after the phase

    def rows(self) -> list[tuple[str, int | str]]:
        rows: list[tuple[str, int | str]] = [("CONNECTs: tried / refused / accepted", "")]
        rows += [(f"  {kind}", f"{self.tried[kind]} / {self.refused[kind]} / {self.accepted[kind]}")
                 for kind in CONNECT_KINDS if self.tried[kind]]
        rows.append(("  how refused", ", ".join(f"{code} x{n}" for code, n in sorted(self.codes.items())) or "-"))
        rows.append(("  takeovers (noticed by the controller)", f"{self.takeovers} ({self.noticed})"))
        rows.append(("  call after the CONNECTs", "answered" if self.call_after else "NOT answered"))
        return rows

    def failures(self) -> list[str]:
        failed = []
        intruded = sum(self.accepted.values()) - self.takeovers
        if intruded:
            failed.append(f"connects: {intruded} CONNECTs accepted without a valid login of their own id")
        if self.noticed < self.takeovers:
            failed.append(f"connects: {self.takeovers - self.noticed} takeovers the controller did not notice")
        if not self.call_after or not self.connected:
            failed.append("connects: no call went through afterwards, or a controller is not connected")
        return failed

    def as_dict(self) -> dict[str, Any]:
        return {kind: {"tried": self.tried[kind], "refused": self.refused[kind], "accepted": self.accepted[kind]}
                for kind in CONNECT_KINDS} | {
            "refusals": dict(self.codes), "takeovers": self.takeovers, "noticed": self.noticed,
            "call_after": self.call_after, "connected": self.connected}


@dataclass
class PreauthReport:
    tried: Counter = field(default_factory=Counter)  # kind -> connections
    refused: Counter = field(default_factory=Counter)  # kind -> closed by the server
    codes: Counter = field(default_factory=Counter)  # "1008", "closed" (no close frame), ... -> connections
    drops: Counter = field(default_factory=Counter)  # msg.drop reason at cc1 -> lines
    kept: bool = False  # the consumer's own connection is the one it had before
    call_after: bool = False

    def rows(self) -> list[tuple[str, int | str]]:
        rows: list[tuple[str, int | str]] = [("WebSocket to cc1, no token: tried / refused", "")]
        rows += [(f"  {kind}", f"{self.tried[kind]} / {self.refused[kind]}") for kind in WS_KINDS if self.tried[kind]]
        rows.append(("  close codes", ", ".join(f"{code} x{n}" for code, n in sorted(self.codes.items())) or "-"))
        rows += [(f"  msg.drop {reason}", n) for reason, n in sorted(self.drops.items())]
        rows.append(("  consumer's connection kept, call after",
                     "yes" if self.kept and self.call_after else "NO"))
        return rows

    def failures(self) -> list[str]:
        failed = []
        tried, refused = sum(self.tried.values()), sum(self.refused.values())
        if refused < tried:
            failed.append(f"ws: {tried - refused} of {tried} connections without a token were not refused")
        if sum(self.drops.values()) != refused:
            failed.append(f"ws: {refused} refused connections, {sum(self.drops.values())} msg.drop lines")
        if not (self.kept and self.call_after):
            failed.append("ws: the consumer's connection was replaced or no call went through afterwards")
        return failed

    def as_dict(self) -> dict[str, Any]:
        return {"tried": dict(self.tried), "refused": dict(self.refused),
                "close_codes": dict(self.codes), "drops": dict(self.drops),
                "consumer_kept": self.kept, "call_after": self.call_after}


async def _call(fuzzer: Fuzzer, word: str) -> bool:
    try:
        return await fuzzer.proxy.call("echo", word, ttl_ms=int(CONNECT_TIMEOUT_S * 1000)) == word
    except Exception:
        return False


async def connect_phase(fuzzer: Fuzzer, per_kind: int) -> ConnectReport:
    sim = fuzzer.sim
    report = ConnectReport()
    host, port = sim.brokers.endpoint("gbid1")
    own = sim.brokers.credentials("fuzzer")
    for n in range(per_kind):
        anonymous_id = (f"anonymous-{n}", *CONTROLLERS)[n % 3]
        attempts = ((ANONYMOUS, anonymous_id, unauthenticated_connect(anonymous_id)),
                    (NO_PASSWORD, "cc2", unauthenticated_connect("cc2", "cc2")),
                    (WRONG_PASSWORD, "cc2", connect_packet("cc2", "cc2", f"wrong-{n}")),
                    (OWN_LOGIN, "cc2", connect_packet("cc2", *own)))
        for kind, client_id, packet in attempts:
            report.tried[kind] += 1
            try:
                code = await asyncio.wait_for(probe(host, port, packet), CONNECT_TIMEOUT_S)
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                report.refused[kind] += 1
                report.codes["closed" if not isinstance(exc, TimeoutError) else "no answer"] += 1
                continue
            if code != 0:
                report.refused[kind] += 1
                report.codes[f"rc {code}"] += 1
                continue
            report.accepted[kind] += 1
            if kind == OWN_LOGIN and client_id in CONTROLLERS:
                report.takeovers += 1
                report.noticed += await _noticed(fuzzer, client_id)
    report.call_after = await _call(fuzzer, "after the CONNECTs")
    fuzzer.read()  # the link events up to here, for the harness's count
    report.connected = all(sim.runtimes[cc].mqtt["gbid1"].connected.is_set() for cc in CONTROLLERS)
    return report


async def _noticed(fuzzer: Fuzzer, runtime: str) -> bool:
    """Whether the controller's connection went (not closed by itself) or came again."""
    seen = []

    def notice(rt: str, e: dict[str, Any]) -> None:
        if rt == runtime and (e["ev"] == "link.attach" or (e["ev"] == "link.detach" and e.get("closed") is False)):
            seen.append(e)

    fuzzer.observers.append(notice)
    try:
        return await fuzzer.until(lambda: bool(seen), NOTICE_TIMEOUT_S)
    finally:
        fuzzer.observers.remove(notice)


def _first_frames(kind: str, n: int, victim: str, wire: str) -> list[bytes | str]:
    """What a connection of ``kind`` sends before the server's verdict; ``victim``: the id
    of a runtime connected to the server; ``wire``: what the runtimes speak."""
    claim = to_dict(WebSocketClientAddress(victim))
    if kind == "garbage text":
        return [f"garbage {n} \u2603 {{["]
    if kind == "1 MiB first frame":
        return [json.dumps(claim) + " " * MIB]
    if kind == "another's id, no token":
        return [json.dumps(claim)]
    if kind == "another's id, wrong token":
        return [json.dumps({**claim, "token": f"wrong-{n}"})]
    if kind == "binary first frame":
        return [valid_frame(wire, victim)]  # a joynr message, as a client sends once accepted
    return []


async def _attempt(url: str, kind: str, n: int, victim: str, wire: str) -> int | None:
    """One connection: its first frame, then until the server closes it. The close code,
    0 for a connection ended without one, None when it was still open after the
    handshake's time (then it is closed here)."""
    try:
        ws = await connect(url, max_size=None, compression=None, proxy=None, open_timeout=CONNECT_TIMEOUT_S)
    except (OSError, InvalidHandshake, TimeoutError):
        return 0
    try:
        for frame in _first_frames(kind, n, victim, wire):
            with contextlib.suppress(ConnectionClosed):
                await ws.send(frame)
        try:
            await asyncio.wait_for(ws.wait_closed(), HANDSHAKE_TIMEOUT_S + NOTICE_TIMEOUT_S)
        except TimeoutError:
            return None
        close = ws.protocol.close_rcvd
        return 0 if close is None else close.code
    finally:
        await ws.close()


async def preauth_phase(fuzzer: Fuzzer, per_kind: int) -> PreauthReport:
    report = PreauthReport()
    cc1 = fuzzer.cc1
    server = cc1.ws_server
    assert server is not None
    consumer_before = server.clients.get(fuzzer.consumer.runtime_id)
    fuzzer.read()  # what came before is no refusal of this phase
    refusals: list[dict[str, Any]] = []

    def refusal(rt: str, e: dict[str, Any]) -> None:
        if rt == "cc1" and e["ev"] == "msg.drop" and e.get("msg") is None and e.get("via") == "ws":
            refusals.append(e)

    fuzzer.observers.append(refusal)
    try:
        url = f"ws://{cc1.ws_host}:{cc1.ws_port}/"
        attempts = [(kind, n) for n in range(per_kind) for kind in WS_KINDS]
        victim = fuzzer.consumer.runtime_id
        codes = await asyncio.gather(*(_attempt(url, kind, n, victim, fuzzer.sim.wire) for kind, n in attempts))
        for (kind, _), code in zip(attempts, codes):
            report.tried[kind] += 1
            report.codes["still open" if code is None else str(code or "closed")] += 1
            # Any other close code is a connection the server took, then ended (1000: another
            # connection replaced it).
            report.refused[kind] += code in REFUSALS
        refused = sum(report.refused.values())
        await fuzzer.until(lambda: len(refusals) >= refused, NOTICE_TIMEOUT_S)
        report.drops.update(e.get("reason") for e in refusals)
    finally:
        fuzzer.observers.remove(refusal)
    report.call_after = await _call(fuzzer, "after the WebSocket intruders")
    report.kept = consumer_before is not None and server.clients.get(fuzzer.consumer.runtime_id) is consumer_before
    return report
