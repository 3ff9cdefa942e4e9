"""Synthetic traces: the run's constants and the writer of per-runtime NDJSON files.

Plain string building, no JSON encoder on the hot path.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

CCS, LIBS = 4, 8
GBIDS = ("g-a", "g-b")
T0 = 1_700_000_000_000
EXPIRY = 600_000
TTL = 60_000  # a message's time to live: its ``exp`` is its sending time plus this
HOP_LIMIT = 8
KIND = {"cc": "cluster-controller", "lib": "libjoynr", "gcd": "gcd", "broker": "broker",
        "runner": "runner"}
CHECK_NAMES = ("routing-loop", "overwrite-violation", "lost-message", "gcd-consistency",
               "link-uniqueness", "takeover-storm", "multicast")


def q(value: str | None) -> str:
    return "null" if value is None else f'"{value}"'


def ent(type_: str, addr: str, expiry: int, sticky: bool = False, visible: bool = False) -> str:
    return (f'{{"type":"{type_}","addr":"{addr}","visible":{"true" if visible else "false"},'
            f'"expiry":{expiry},"sticky":{"true" if sticky else "false"}}}')


class Writer:
    """Per-runtime NDJSON files, sequence numbers, and the run's clock."""

    def __init__(self, run_dir: Path, run_id: str) -> None:
        self.dir = run_dir / "trace"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run = run_id
        self.t = T0
        self.exp = T0 + TTL  # the expiry the next messages carry (set per exchange)
        self.count = 0
        self.seq: dict[str, int] = defaultdict(int)
        self.buf: dict[str, list[str]] = defaultdict(list)
        self.planted: dict[str, list[str]] = {name: [] for name in CHECK_NAMES}

    def emit(self, rt: str, ev: str, body: str) -> tuple[int, int]:
        """Writes one event; returns its (ts, seq)."""
        self.t += 1
        s = self.seq[rt]
        self.seq[rt] = s + 1
        kind = KIND[rt.split("-", 1)[0]]
        buf = self.buf[rt]
        buf.append(f'{{"v":1,"ts":{self.t},"seq":{s},"run":"{self.run}","rt":"{rt}",'
                   f'"kind":"{kind}","ev":"{ev}",{body}}}\n')
        self.count += 1
        if len(buf) >= 20_000:
            self._flush(rt)
        return self.t, s

    def _flush(self, rt: str) -> None:
        with open(self.dir / f"{rt}.ndjson", "a", encoding="utf-8") as f:
            f.write("".join(self.buf[rt]))
        self.buf[rt].clear()

    def close(self) -> None:
        for rt in list(self.buf):
            self._flush(rt)

    def plant(self, check: str, *parts: object) -> None:
        self.planted[check].append("/".join([self.run, *map(str, parts)]))

    # -- event bodies ------------------------------------------------------------------
    def msg(self, rt: str, ev: str, msg: str, type_: str, frm: str, to: str, hops: int,
            corr: str | None, via: str | None = None, gbid: str | None = None,
            target: str | None = None, addr_type: str | None = None,
            reason: str | None = None) -> tuple[int, int]:
        body = (f'"msg":"{msg}","type":"{type_}","from":"{frm}","to":"{to}","hops":{hops},'
                f'"corr":{q(corr)},"exp":{self.exp}')
        if ev == "msg.out":
            body += (f',"via":"{via}","addr_type":{q(addr_type)},"target":{q(target)},'
                     f'"gbid":{q(gbid)},"resent":false')
        elif ev == "msg.in":
            body += f',"via":"{via}","gbid":{q(gbid)}'
        if reason is not None:
            body += f',"reason":"{reason}"'
        return self.emit(rt, ev, body)

    def expire_in(self, ms: int) -> None:
        """The messages written next expire ``ms`` from now."""
        self.exp = self.t + ms

    def advance(self, ms: int) -> None:
        """Time passes without events (a lull in the traffic)."""
        self.t += ms

    def put(self, rt: str, participant: str, outcome: str, origin: str, old: str | None,
            new: str, entry: str | None, reason: str = "", policy: str = "precedence") -> int:
        _, s = self.emit(rt, "rt.put", (
            f'"participant":"{participant}","policy":"{policy}","outcome":"{outcome}",'
            f'"reason":"{reason}","origin":"{origin}","old":{old or "null"},"new":{new},'
            f'"entry":{entry or "null"}'))
        return s

    def life(self, ev: str, target: str, extra: str = "") -> None:
        kind = KIND[target.split("-", 1)[0]]
        self.emit("runner", ev, f'"target":"{target}","target_kind":"{kind}"{extra}')

    def attach(self, rt: str, gbid: str, client: str, conn: str, mode: str,
               session_present: bool | None = None) -> int:
        """A link attach; the broker held the session unless it was established anew."""
        present = mode != "establish" if session_present is None else session_present
        return self.emit(rt, "link.attach", f'"gbid":"{gbid}","client_id":"{client}",'
                         f'"conn":"{conn}","mode":"{mode}",'
                         f'"session_present":{"true" if present else "false"}')[1]

    def detach(self, rt: str, gbid: str, client: str, conn: str, closed: bool = False) -> None:
        self.emit(rt, "link.detach", f'"gbid":"{gbid}","client_id":"{client}","conn":"{conn}",'
                  f'"closed":{"true" if closed else "false"},"error":null')

    def steal(self, rt: str, gbid: str, client: str, conn: str, victim: str) -> None:
        self.emit(rt, "link.steal", f'"gbid":"{gbid}","client_id":"{client}","conn":"{conn}",'
                  f'"victim":"{victim}"')
