"""The flood phase of the fuzz run: a client with a valid login of its own publishes N valid
requests for participants nobody knows, at QoS 1, from one sender, to ``cc2``'s topic
(``publisher``, a process of its own), while the consumer's proxy calls the Echo provider
behind ``cc2`` every 100 ms. ``cc2`` keeps that sender to its share (``core.fairness``).

Every flood frame must have one fate in ``cc2``'s trace: a ``msg.in`` (it waits for a
route), a ``sender-limit`` drop of its id (it was past the sender's share of the queue or of
the lookups), or a share of a ``sender-limit`` line with ``count`` (the sender was muted).
The last of those lines may come only when ``cc2`` stops gracefully, so the accounting is
final once the harness has read the traces after the simulation closed (``finish``).

The run fails when fewer than 90% of the calls made during the flood, or not every one of
the calls right after it, is answered, or when the flood frames and their fates differ in
number.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .harness import Fuzzer

FLOOD_SENDER = "flooder"
FLOOD_PREFIX = "flood-"
END_ID = f"{FLOOD_PREFIX}end"
TARGET = "cc2"
CALL_EVERY_S = 0.1
CALL_TTL_MS = 10_000
CALLS_AFTER = 20
ANSWERED_SHARE = 0.9
PUBLISHER_TIMEOUT_S = 300  # 5,000 frames take seconds; a publisher still going after this is stuck
END_TIMEOUT_S = 120  # from the publisher's exit until cc2 has taken the flood's last message


@dataclass
class FloodReport:
    sent: int = 0
    publisher: str = ""  # what the publishing process said (or why it failed)
    received: set[str] = field(default_factory=set)  # ids with a msg.in: they wait for a route
    dropped: set[str] = field(default_factory=set)  # ids with a sender-limit drop of their own
    counted: int = 0  # the sum of the counting lines of the flood's sender
    copies: Counter = field(default_factory=Counter)  # a second event of a flood id, by event
    end_seen: bool = False
    during: tuple[int, int] = (0, 0)  # (answered, made)
    after: tuple[int, int] = (0, 0)
    final: bool = False  # the traces were read after the simulation closed

    def see(self, rt: str, e: dict[str, Any]) -> None:
        """An event of the run: the fate of a flood frame, a counting line, the end mark."""
        if rt != TARGET:
            return
        mid = e.get("msg")
        if mid == END_ID:
            self.end_seen = True
        if e.get("from") != FLOOD_SENDER:
            return
        if e["ev"] == "msg.drop" and e.get("reason") == "sender-limit" and mid is None:
            self.counted += int(e.get("count") or 0)
            return
        # As received from the publisher: over MQTT, no hop yet (the router counts one after msg.in).
        if not (isinstance(mid, str) and mid.startswith(FLOOD_PREFIX) and e.get("via") == "mqtt"
                and e.get("hops") == 0):
            return
        if e["ev"] == "msg.in":
            fates = self.received
        elif e["ev"] == "msg.drop" and e.get("reason") == "sender-limit":
            fates = self.dropped
        else:
            return
        if mid in self.received or mid in self.dropped:
            self.copies[e["ev"]] += 1  # a QoS 1 copy sent again, or a frame with two fates
        else:
            fates.add(mid)

    @property
    def accounted(self) -> int:
        return len(self.received) + len(self.dropped) + self.counted

    def rows(self) -> list[tuple[str, int | str]]:
        rows: list[tuple[str, int | str]] = [
            ("flood frames sent (one sender, QoS 1, to cc2)", self.sent),
            ("  received, waiting for a route (msg.in)", len(self.received)),
            ("  dropped sender-limit one by one", len(self.dropped)),
            ("  counted in sender-limit lines", self.counted),
            ("  accounted for", self.accounted),
        ]
        if sum(self.copies.values()):
            rows.append(("  copies of a flood frame", sum(self.copies.values())))
        rows += [("calls answered during the flood", f"{self.during[0]} of {self.during[1]}"),
                 ("calls answered after the flood", f"{self.after[0]} of {self.after[1]}")]
        return rows

    def failures(self) -> list[str]:
        failed = []
        if not self.end_seen:
            failed.append(f"flood: cc2 never took the flood's last message ({self.publisher})")
        if self.accounted != self.sent:
            failed.append(f"flood: {self.sent} frames, {self.accounted} fates"
                          + ("" if self.final else " (the traces were not read after the stop)"))
        answered, made = self.during
        if made == 0 or answered < ANSWERED_SHARE * made:
            failed.append(f"flood: {answered} of {made} calls answered during the flood")
        if self.after[0] < self.after[1] or self.after[1] == 0:
            failed.append(f"flood: {self.after[0]} of {self.after[1]} calls answered after the flood")
        return failed

    def as_dict(self) -> dict[str, Any]:
        return {"sent": self.sent, "received": len(self.received), "dropped": len(self.dropped),
                "counted": self.counted, "accounted": self.accounted, "copies": dict(self.copies),
                "calls_during": {"answered": self.during[0], "made": self.during[1]},
                "calls_after": {"answered": self.after[0], "made": self.after[1]},
                "publisher": self.publisher}


async def _calls_while(proxy: Any, running: asyncio.Task) -> tuple[int, int]:
    """A call every CALL_EVERY_S, each answered within its ttl or not at all, until
    ``running`` is done: (answered, made)."""
    calls = []
    while not running.done():
        calls.append(asyncio.create_task(proxy.call("echo", f"during-{len(calls)}", ttl_ms=CALL_TTL_MS)))
        await asyncio.wait([running], timeout=CALL_EVERY_S)
    results = await asyncio.gather(*calls, return_exceptions=True)
    return sum(r == f"during-{n}" for n, r in enumerate(results)), len(results)


async def _publish(args: list[str]) -> tuple[int | None, str]:
    """Run the publisher to its end, within PUBLISHER_TIMEOUT_S: (exit code, what it said)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "joynr_sim.fuzz.publisher", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(process.communicate(), PUBLISHER_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        return None, f"the publisher did not finish within {PUBLISHER_TIMEOUT_S} s"
    text = out.decode(errors="replace").strip()
    return process.returncode, text.splitlines()[-1] if process.returncode == 0 and text else text[-2000:]


async def flood_phase(fuzzer: Fuzzer, frames: int) -> FloodReport:
    """Flood cc2 with ``frames`` requests while calls go on; then the calls after it. The
    report's accounting is complete once the harness has read the traces after the stop."""
    sim = fuzzer.sim
    report = FloodReport(sent=frames)
    fuzzer.observers.append(report.see)
    host, port = sim.brokers.endpoint("gbid1")
    user, password = sim.brokers.credentials(FLOOD_SENDER)
    expiry = sim.clock.now_ms() + 600_000  # longer than the run: no flood frame expires on the way
    publishing = asyncio.ensure_future(_publish(
        [host, str(port), user, password, f"{TARGET}/low", str(frames), FLOOD_SENDER, str(expiry), FLOOD_PREFIX,
         sim.wire]))
    report.during = await _calls_while(fuzzer.proxy, publishing)
    code, report.publisher = publishing.result()
    if code == 0:
        # Until cc2 has taken the last message: what the broker still holds for it at the
        # stop would have no fate.
        await fuzzer.until(lambda: report.end_seen, END_TIMEOUT_S)
    results = await asyncio.gather(
        *(fuzzer.proxy.call("echo", f"after-{n}", ttl_ms=CALL_TTL_MS) for n in range(CALLS_AFTER)),
        return_exceptions=True)
    report.after = (sum(r == f"after-{n}" for n, r in enumerate(results)), CALLS_AFTER)
    return report
