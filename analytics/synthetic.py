"""Synthetic traces at scale, with planted violations and their answer key.

Each run directory gets cluster controllers (``cc-0``..), libjoynr runtimes, GCD instances,
brokers and a runner, and a realistic mix: request/reply exchanges over WebSocket and MQTT
with their reply-to routing entries, GCD registrations and lookups, link reattaches and
steals, queued and expired requests, purges. Every event advances the simulated clock by
one millisecond, so the order of events is unambiguous. At known places each run gets the
planted violations of every check and a few look-alikes that are not violations; the
answer key lists the violation keys the checker must report, and nothing else.

Runs are written in parallel processes with plain string building (no JSON encoder on
the hot path).

    python -m analytics.synthetic OUT_DIR --events 1000000 --runs 2
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

CCS, LIBS = 4, 8
GBIDS = ("g-a", "g-b")
T0 = 1_700_000_000_000
EXPIRY = 600_000
HOP_LIMIT = 8
KIND = {"cc": "cluster-controller", "lib": "libjoynr", "gcd": "gcd", "broker": "broker",
        "runner": "runner"}
CHECK_NAMES = ("routing-loop", "overwrite-violation", "lost-message", "gcd-consistency",
               "link-uniqueness", "takeover-storm")


def q(value: str | None) -> str:
    return "null" if value is None else f'"{value}"'


def ent(type_: str, addr: str, expiry: int, sticky: bool = False, visible: bool = False) -> str:
    return (f'{{"type":"{type_}","addr":"{addr}","visible":{"true" if visible else "false"},'
            f'"expiry":{expiry},"sticky":{"true" if sticky else "false"}}}')


class _Writer:
    """Per-runtime NDJSON files, sequence numbers, and the run's clock."""

    def __init__(self, run_dir: Path, run_id: str) -> None:
        self.dir = run_dir / "trace"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run = run_id
        self.t = T0
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
                f'"corr":{q(corr)}')
        if ev == "msg.out":
            body += (f',"via":"{via}","addr_type":{q(addr_type)},"target":{q(target)},'
                     f'"gbid":{q(gbid)},"resent":false')
        elif ev == "msg.in":
            body += f',"via":"{via}","gbid":{q(gbid)}'
        elif reason is not None:
            body += f',"reason":"{reason}"'
        return self.emit(rt, ev, body)

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

    def attach(self, rt: str, gbid: str, client: str, conn: str, mode: str) -> int:
        return self.emit(rt, "link.attach", f'"gbid":"{gbid}","client_id":"{client}",'
                         f'"conn":"{conn}","mode":"{mode}"')[1]

    def detach(self, rt: str, gbid: str, client: str, conn: str, closed: bool = False) -> None:
        self.emit(rt, "link.detach", f'"gbid":"{gbid}","client_id":"{client}","conn":"{conn}",'
                  f'"closed":{"true" if closed else "false"},"error":null')

    def steal(self, rt: str, gbid: str, client: str, conn: str, victim: str) -> None:
        self.emit(rt, "link.steal", f'"gbid":"{gbid}","client_id":"{client}","conn":"{conn}",'
                  f'"victim":"{victim}"')


def _lib_cc(lib: int) -> int:
    return lib % CCS


class _Run:
    def __init__(self, w: _Writer) -> None:
        self.w = w
        self.conn: dict[tuple[int, str], str] = {}
        self.conn_n = 0
        self.reply_to: dict[tuple[int, str], tuple[str, int]] = {}  # (cc, proxy) -> addr, expiry
        self.gcd_routes: dict[tuple[int, str], tuple[str, int]] = {}

    def new_conn(self, cc: int, gbid: str) -> str:
        self.conn_n += 1
        return f"c{self.conn_n}"

    # -- phases ------------------------------------------------------------------------
    def start(self) -> None:
        w = self.w
        for i, g in enumerate(GBIDS):
            w.life("life.start", f"broker-{g}", f',"gbid":"{g}","port":{18830 + i}')
        for c in range(CCS):
            w.life("life.start", f"cc-{c}",
                   f',"gbids":["g-a","g-b"],"own_topics":["cc-{c}"]')
        for lib in range(LIBS):
            w.life("life.start", f"lib-{lib}")
        for g in GBIDS:
            w.life("life.start", f"gcd-{g}")
        for c in range(CCS):
            self.attach_all(c, "establish")
            for g in GBIDS:
                sticky = ent("Mqtt", f"{g}/gcd", T0 + 10 * EXPIRY, sticky=True)
                w.put(f"cc-{c}", f"gcd-provider-{g}", "created", "provisioned", None, sticky, sticky)
        for lib in range(LIBS):
            c = _lib_cc(lib)
            e = ent("WebSocketClient", f"lib-{lib}", T0 + 100 * EXPIRY)
            w.put(f"cc-{c}", f"prov-{lib}", "created", "registration", None, e, e)
            e = ent("InProcess", f"inprocess:{lib}", T0 + 100 * EXPIRY)
            w.put(f"lib-{lib}", f"prov-{lib}", "created", "registration", None, e, e)

    def attach_all(self, c: int, mode: str) -> None:
        for g in GBIDS:
            conn = self.new_conn(c, g)
            self.conn[(c, g)] = conn
            self.w.attach(f"cc-{c}", g, f"cc-{c}", conn, mode)

    def exchange(self, i: int) -> None:
        w = self.w
        p = i % LIBS
        q_ = (i * 5 + 3) % LIBS
        if _lib_cc(q_) == _lib_cc(p):
            q_ = (q_ + 1) % LIBS
        a, b = _lib_cc(p), _lib_cc(q_)
        g = GBIDS[i % 2]
        ca, cb, lp, lq = f"cc-{a}", f"cc-{b}", f"lib-{p}", f"lib-{q_}"
        proxy, prov = f"proxy-{p}", f"prov-{q_}"
        m, r, c = f"q{i}", f"p{i}", f"c{i}"
        if i % 200 == 199:  # no route yet: queued, then expired and dropped (recorded)
            w.msg(lp, "msg.out", m, "rq", proxy, prov, 1, c, "ws", None, f"ws://{ca}:4242/", "WebSocket")
            w.msg(ca, "msg.in", m, "rq", proxy, prov, 1, c, "ws")
            w.emit(ca, "msg.queue", f'"msg":"{m}","type":"rq","from":"{proxy}","to":"{prov}",'
                   f'"hops":1,"corr":"{c}","reason":"no-route"')
            w.msg(ca, "msg.drop", m, "rq", proxy, prov, 1, c, reason="expired")
            return
        w.msg(lp, "msg.out", m, "rq", proxy, prov, 1, c, "ws", None, f"ws://{ca}:4242/", "WebSocket")
        w.msg(ca, "msg.in", m, "rq", proxy, prov, 1, c, "ws")
        w.msg(ca, "msg.out", m, "rq", proxy, prov, 2, c, "mqtt", g, f"{g}/{cb}", "Mqtt")
        w.msg(cb, "msg.in", m, "rq", proxy, prov, 2, c, "mqtt", g)
        self.reply_to_put(b, proxy, f"{g}/{ca}")
        w.msg(cb, "msg.out", m, "rq", proxy, prov, 3, c, "ws", None, lq, "WebSocketClient")
        w.msg(lq, "msg.in", m, "rq", proxy, prov, 3, c, "ws")
        w.msg(lq, "msg.deliver", m, "rq", proxy, prov, 3, c)
        w.msg(lq, "msg.out", r, "rp", prov, proxy, 1, c, "ws", None, f"ws://{cb}:4242/", "WebSocket")
        w.msg(cb, "msg.in", r, "rp", prov, proxy, 1, c, "ws")
        w.msg(cb, "msg.out", r, "rp", prov, proxy, 2, c, "mqtt", g, f"{g}/{ca}", "Mqtt")
        w.msg(ca, "msg.in", r, "rp", prov, proxy, 2, c, "mqtt", g)
        w.msg(ca, "msg.out", r, "rp", prov, proxy, 3, c, "ws", None, lp, "WebSocketClient")
        w.msg(lp, "msg.in", r, "rp", prov, proxy, 3, c, "ws")
        w.msg(lp, "msg.deliver", r, "rp", prov, proxy, 3, c)
        if i % 25 == 0:
            self.discovery(i, a, b, g, prov)
        if i % 50 == 25:
            self.reattach(a, g)
        if i % 300 == 0:
            self.short_lived(i, b)
        if i % 5000 == 2500:
            self.steal(i)
        if i % 1000 == 0:
            w.emit("runner", "step", f'"index":{i // 1000},"name":"exchange {i}","outcome":"ok",'
                   '"detail":null')

    def reply_to_put(self, cc: int, proxy: str, addr: str) -> None:
        w = self.w
        new_exp = w.t + EXPIRY
        new = ent("Mqtt", addr, new_exp)
        held = self.reply_to.get((cc, proxy))
        if held is None:
            w.put(f"cc-{cc}", proxy, "created", "reply-to", None, new, new)
            self.reply_to[(cc, proxy)] = (addr, new_exp)
            return
        old_addr, old_exp = held
        exp = max(old_exp, new_exp)
        outcome = "merged" if old_addr == addr else "replaced"
        w.put(f"cc-{cc}", proxy, outcome, "reply-to", ent("Mqtt", old_addr, old_exp), new,
              ent("Mqtt", addr, exp))
        self.reply_to[(cc, proxy)] = (addr, exp)

    def discovery(self, i: int, a: int, b: int, g: str, prov: str) -> None:
        w = self.w
        gcd = f"gcd-{g}"
        if i % 100 == 0:  # unregister and register again: later lookups may return it
            w.emit(gcd, "gcd.remove", f'"op":"remove","participant":"{prov}","gbids":["{g}"],'
                   f'"removed":[["{prov}","{g}"]],"error":null')
        w.emit(gcd, "gcd.add", f'"op":"add","participant":"{prov}","gbids":["{g}"],'
               f'"cc":"cc-{b}","error":null')
        w.emit(gcd, "gcd.lookup", f'"op":"lookup_participant","gbids":["{g}"],"domains":null,'
               f'"interface":null,"participant":"{prov}",'
               f'"result":[{{"participant":"{prov}","gbid":"{g}"}}],"error":null')
        w.emit(f"cc-{a}", "lcd.lookup", f'"participant":"{prov}","domains":["d"],'
               f'"interface":"vehicle/Radio","scope":"LOCAL_THEN_GLOBAL","gbids":["{g}"],'
               f'"result":["{prov}"],"error":null')
        # cc-a learns the route from the GCD; cc-b keeps its local WebSocketClient entry
        addr = f"{g}/cc-{b}"
        new_exp = w.t + EXPIRY
        held = self.gcd_routes.get((a, prov))
        new = ent("Mqtt", addr, new_exp)
        if held is None:
            w.put(f"cc-{a}", prov, "created", "gcd", None, new, new)
            self.gcd_routes[(a, prov)] = (addr, new_exp)
        else:
            old_addr, old_exp = held
            exp = max(old_exp, new_exp)
            w.put(f"cc-{a}", prov, "merged" if old_addr == addr else "replaced", "gcd",
                  ent("Mqtt", old_addr, old_exp), new, ent("Mqtt", addr, exp))
            self.gcd_routes[(a, prov)] = (addr, exp)
        local = ent("WebSocketClient", prov.replace("prov-", "lib-"), T0 + 100 * EXPIRY)
        other = (b + 1) % CCS
        w.put(f"cc-{b}", prov, "refused", "gcd", local, ent("Mqtt", f"{g}/cc-{other}", new_exp),
              local, reason="precedence")

    def reattach(self, c: int, g: str) -> None:
        old = self.conn[(c, g)]
        new = self.new_conn(c, g)
        self.w.detach(f"cc-{c}", g, f"cc-{c}", old)
        self.w.attach(f"cc-{c}", g, f"cc-{c}", new, "resume")
        self.conn[(c, g)] = new

    def steal(self, i: int) -> None:
        c, g = (i // 5000) % CCS, GBIDS[(i // 5000) % 2]
        old = self.conn[(c, g)]
        new = self.new_conn(c, g)
        self.w.steal(f"cc-{c}", g, f"cc-{c}", new, old)
        self.w.attach(f"cc-{c}", g, f"cc-{c}", new, "steal")
        self.conn[(c, g)] = new

    def short_lived(self, i: int, b: int) -> None:
        w = self.w
        e = ent("Mqtt", f"g-a/cc-{(b + 1) % CCS}", w.t + 50)
        w.put(f"cc-{b}", f"tmp-{i}", "created", "gcd", None, e, e)
        if i >= 300:
            gone = ent("Mqtt", f"g-a/cc-{(b + 1) % CCS}", w.t - 1000)
            w.emit(f"cc-{b}", "rt.purge", f'"participant":"tmp-{i - 300}","policy":"precedence",'
                   f'"outcome":"removed","reason":"expired","old":{gone}')

    # -- planted violations ------------------------------------------------------------
    def plant_loop(self, j: int) -> None:
        w = self.w
        ghost, m = f"ghost-{j}", f"loop{j}"
        for cc, other in ((0, 1), (1, 0)):
            e = ent("Mqtt", f"g-a/cc-{other}", w.t + EXPIRY)
            w.put(f"cc-{cc}", ghost, "created", "gcd", None, e, e)
        w.msg("lib-0", "msg.out", m, "rq", "proxy-0", ghost, 1, f"lc-{j}", "ws", None,
              "ws://cc-0:4242/", "WebSocket")
        w.msg("cc-0", "msg.in", m, "rq", "proxy-0", ghost, 1, f"lc-{j}", "ws")
        here, there = 0, 1
        for hops in range(2, HOP_LIMIT + 1):
            w.msg(f"cc-{here}", "msg.out", m, "rq", "proxy-0", ghost, hops, f"lc-{j}", "mqtt",
                  "g-a", f"g-a/cc-{there}", "Mqtt")
            w.msg(f"cc-{there}", "msg.in", m, "rq", "proxy-0", ghost, hops, f"lc-{j}", "mqtt", "g-a")
            here, there = there, here
        w.msg(f"cc-{here}", "msg.drop", m, "rq", "proxy-0", ghost, HOP_LIMIT, f"lc-{j}",
              reason="hop-limit")
        w.plant("routing-loop", m)

    def plant_overwrites(self, j: int) -> None:
        w, rt = self.w, "cc-2"
        exp = w.t + EXPIRY
        wsc = ent("WebSocketClient", "lib-6", exp)
        mq = ent("Mqtt", "g-a/cc-3", exp)
        sticky = ent("Mqtt", "g-a/cc-3", exp, sticky=True)
        p = f"ow{j}"
        w.put(rt, f"{p}-a", "created", "registration", None, wsc, wsc)
        s = w.put(rt, f"{p}-a", "replaced", "gcd", wsc, mq, mq)  # WebSocketClient lost to Mqtt
        w.plant("overwrite-violation", rt, s)
        w.put(rt, f"{p}-b", "created", "gcd", None, mq, mq)
        s = w.put(rt, f"{p}-b", "refused", "registration", mq, wsc, mq)  # must have replaced
        w.plant("overwrite-violation", rt, s)
        late = ent("Mqtt", "g-a/cc-3", exp + 1000)
        w.put(rt, f"{p}-c", "created", "gcd", None, late, late)
        s = w.put(rt, f"{p}-c", "merged", "gcd", late, mq, mq)  # shorter expiry kept
        w.plant("overwrite-violation", rt, s)
        w.put(rt, f"{p}-d", "created", "provisioned", None, sticky, sticky)
        s = w.put(rt, f"{p}-d", "merged", "gcd", sticky, mq, mq)  # sticky flag lost
        w.plant("overwrite-violation", rt, s)
        own = ent("Mqtt", "g-b/cc-2", exp)
        s = w.put(rt, f"{p}-e", "created", "reply-to", None, own, own)  # its own topic
        w.plant("overwrite-violation", rt, s)
        w.put(rt, f"{p}-f", "created", "provisioned", None, sticky, sticky)
        _, s = w.emit(rt, "rt.remove", f'"participant":"{p}-f","policy":"precedence",'
                      f'"outcome":"removed","old":{sticky},"entry":null')  # sticky removed
        w.plant("overwrite-violation", rt, s)
        # look-alikes: a sticky entry correctly kept, a correct refusal of a remove
        w.put(rt, f"{p}-g", "created", "provisioned", None, sticky, sticky)
        w.put(rt, f"{p}-g", "refused", "gcd", sticky, ent("Mqtt", "g-a/cc-1", exp), sticky)
        w.emit(rt, "rt.remove", f'"participant":"{p}-g","policy":"precedence",'
               f'"outcome":"refused-sticky","old":{sticky},"entry":{sticky}')

    def plant_lost(self, j: int) -> None:
        w = self.w
        m, c = f"lost{j}", f"lostc{j}"
        w.msg("lib-1", "msg.out", m, "rq", "proxy-1", "prov-2", 1, c, "ws", None, "ws://cc-1:4242/", "WebSocket")
        w.msg("cc-1", "msg.in", m, "rq", "proxy-1", "prov-2", 1, c, "ws")
        w.msg("cc-1", "msg.out", m, "rq", "proxy-1", "prov-2", 2, c, "mqtt", "g-a", "g-a/cc-2", "Mqtt")
        w.msg("cc-2", "msg.in", m, "rq", "proxy-1", "prov-2", 2, c, "mqtt", "g-a")
        w.msg("cc-2", "msg.out", m, "rq", "proxy-1", "prov-2", 3, c, "ws", None, "lib-2", "WebSocketClient")
        w.msg("lib-2", "msg.in", m, "rq", "proxy-1", "prov-2", 3, c, "ws")
        w.msg("lib-2", "msg.deliver", m, "rq", "proxy-1", "prov-2", 3, c)  # and no reply, ever
        w.plant("lost-message", "lost-request", m)
        m, c = f"dup{j}", f"dupc{j}"
        w.msg("lib-5", "msg.out", m, "o", "proxy-5", "prov-6", 1, None, "ws", None, "ws://cc-1:4242/", "WebSocket")
        w.msg("cc-1", "msg.in", m, "o", "proxy-5", "prov-6", 1, None, "ws")
        w.msg("cc-1", "msg.out", m, "o", "proxy-5", "prov-6", 2, None, "mqtt", "g-b", "g-b/cc-2", "Mqtt")
        w.msg("cc-2", "msg.in", m, "o", "proxy-5", "prov-6", 2, None, "mqtt", "g-b")
        w.msg("cc-2", "msg.out", m, "o", "proxy-5", "prov-6", 3, None, "ws", None, "lib-6", "WebSocketClient")
        w.msg("lib-6", "msg.in", m, "o", "proxy-5", "prov-6", 3, None, "ws")
        w.msg("lib-6", "msg.deliver", m, "o", "proxy-5", "prov-6", 3, None)
        w.msg("lib-6", "msg.deliver", m, "o", "proxy-5", "prov-6", 3, None)
        w.plant("lost-message", "duplicate-delivery", m, "lib-6")
        m = f"van{j}"
        w.msg("cc-1", "msg.out", m, "o", "proxy-1", "prov-2", 2, None, "mqtt", "g-a", "g-a/cc-2", "Mqtt")
        w.plant("lost-message", "vanished-hop", m, 2, "cc-1")

    def plant_crash(self, j: int) -> None:
        """Look-alikes only: losses a crash of cc-3 explains."""
        w = self.w
        m, c = f"crash{j}", f"crashc{j}"
        w.msg("lib-0", "msg.out", m, "rq", "proxy-0", "prov-3", 1, c, "ws", None, "ws://cc-0:4242/", "WebSocket")
        w.msg("cc-0", "msg.in", m, "rq", "proxy-0", "prov-3", 1, c, "ws")
        w.msg("cc-0", "msg.out", m, "rq", "proxy-0", "prov-3", 2, c, "mqtt", "g-a", "g-a/cc-3", "Mqtt")
        w.msg("cc-3", "msg.in", m, "rq", "proxy-0", "prov-3", 2, c, "mqtt", "g-a")
        w.msg("cc-0", "msg.out", f"crasho{j}", "o", "proxy-0", "prov-3", 2, None, "mqtt", "g-b",
              "g-b/cc-3", "Mqtt")
        w.life("life.crash", "cc-3")
        w.life("life.restart", "cc-3", ',"gbids":["g-a","g-b"],"own_topics":["cc-3"]')
        self.attach_all(3, "establish")  # old attachments ended with the crash

    def plant_gcd(self, j: int) -> None:
        w, gcd = self.w, "gcd-g-a"
        w.emit(gcd, "gcd.lookup", '"op":"lookup_domains","gbids":["g-a","g-b"],"domains":["d"],'
               '"interface":"vehicle/Radio","participant":null,"result":[{"participant":"prov-1",'
               '"gbid":"g-a"},{"participant":"prov-1","gbid":"g-b"}],"error":null')
        w.plant("gcd-consistency", gcd, w.seq[gcd] - 1)
        w.emit(gcd, "gcd.lookup", '"op":"lookup_participant","gbids":["g-a"],"domains":null,'
               '"interface":null,"participant":"prov-2","result":[{"participant":"prov-2",'
               '"gbid":"g-b"}],"error":null')
        w.plant("gcd-consistency", gcd, w.seq[gcd] - 1)
        gone = f"gone-{j}"
        w.emit(gcd, "gcd.add", f'"op":"add","participant":"{gone}","gbids":["g-a","g-b"],'
               '"cc":"cc-1","error":null')
        w.emit(gcd, "gcd.remove", f'"op":"remove","participant":"{gone}","gbids":["g-a"],'
               f'"removed":[["{gone}","g-a"]],"error":null')
        w.emit(gcd, "gcd.lookup", f'"op":"lookup_participant","gbids":["g-a","g-b"],'
               f'"domains":null,"interface":null,"participant":"{gone}",'
               f'"result":[{{"participant":"{gone}","gbid":"g-a"}}],"error":null')
        w.plant("gcd-consistency", gcd, w.seq[gcd] - 1)
        # look-alike: still registered in g-b
        w.emit(gcd, "gcd.lookup", f'"op":"lookup_participant","gbids":["g-a","g-b"],'
               f'"domains":null,"interface":null,"participant":"{gone}",'
               f'"result":[{{"participant":"{gone}","gbid":"g-b"}}],"error":null')

    def plant_links(self, j: int) -> None:
        w = self.w
        key = f"dup-{j}"
        w.attach("cc-1", "g-a", key, f"{key}-x", "establish")
        w.attach("cc-2", "g-a", key, f"{key}-y", "establish")  # no steal: both live
        w.detach("cc-1", "g-a", key, f"{key}-x", closed=True)
        w.detach("cc-2", "g-a", key, f"{key}-y", closed=True)
        w.plant("link-uniqueness", "g-a", key, f"{key}-x+{key}-y")
        storm = f"storm-{j}"
        prev = f"{storm}-0"
        w.attach("cc-1", "g-b", storm, prev, "establish")
        for k in range(1, 7):
            rt = f"cc-{1 + k % 2}"
            conn = f"{storm}-{k}"
            w.steal(rt, "g-b", storm, conn, prev)
            w.attach(rt, "g-b", storm, conn, "steal")
            prev = conn
        w.plant("takeover-storm", "g-b", storm)
        w.emit("cc-0", "link.takeover-storm", f'"gbid":"g-a","client_id":"stormev-{j}",'
               '"runtimes":["cc-0","cc-3"],"count":7,"window_ms":10000')
        w.plant("takeover-storm", "g-a", f"stormev-{j}")
        calm = f"calm-{j}"  # look-alike: four steals are not a storm
        prev = f"{calm}-0"
        w.attach("cc-1", "g-b", calm, prev, "establish")
        for k in range(1, 5):
            conn = f"{calm}-{k}"
            w.steal("cc-2", "g-b", calm, conn, prev)
            w.attach("cc-2", "g-b", calm, conn, "steal")
            prev = conn


PLANTS = ("plant_loop", "plant_overwrites", "plant_lost", "plant_gcd", "plant_links", "plant_crash")
_EVENTS_PER_EXCHANGE = 15.6  # measured mix; only places the planted violations


@dataclass(frozen=True)
class _Job:
    run_dir: str
    run_id: str
    events: int


def _write_run(job: _Job) -> tuple[int, dict[str, list[str]]]:
    run_dir = Path(job.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps({"run": job.run_id, "policy": "precedence",
                                                  "synthetic": True}))
    w = _Writer(run_dir, job.run_id)
    run = _Run(w)
    run.start()
    expected = max(int(job.events / _EVENTS_PER_EXCHANGE), len(PLANTS) * 2)
    at = {int(expected * (k + 1) / (len(PLANTS) + 1)): name for k, name in enumerate(PLANTS)}
    i = 0
    done: set[str] = set()
    while w.count < job.events or len(done) < len(PLANTS):
        run.exchange(i)
        name = at.get(i)
        if name is not None or (w.count >= job.events and len(done) < len(PLANTS)):
            name = name or next(p for p in PLANTS if p not in done)
            if name not in done:
                getattr(run, name)(len(done))
                done.add(name)
        i += 1
    w.close()
    return w.count, w.planted


def generate(root: Path, events: int, runs: int = 2, workers: int | None = None) -> dict:
    """Writes ``runs`` run directories under ``root`` (about ``events`` events in all) and
    ``root/answer_key.json``; returns the answer key."""
    root.mkdir(parents=True, exist_ok=True)
    jobs = [_Job(str(root / f"syn-{k}"), f"syn-{k}", max(events // runs, 1)) for k in range(runs)]
    if runs == 1 or workers == 1:
        results = [_write_run(j) for j in jobs]
    else:
        with ProcessPoolExecutor(max_workers=min(runs, workers or 2)) as pool:
            results = list(pool.map(_write_run, jobs))
    planted: dict[str, list[str]] = {name: [] for name in CHECK_NAMES}
    for _, keys in results:
        for name, found in keys.items():
            planted[name].extend(found)
    key = {
        "events": sum(n for n, _ in results),
        "runs": [j.run_dir for j in jobs],
        "planted": {name: sorted(v) for name, v in planted.items()},
    }
    (root / "answer_key.json").write_text(json.dumps(key, indent=2))
    return key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analytics.synthetic", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the run directories")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args(argv)
    key = generate(args.out, args.events, args.runs)
    print(f"{key['events']:,} events in {len(key['runs'])} run(s); "
          f"{sum(map(len, key['planted'].values()))} planted violations; "
          f"answer key {args.out / 'answer_key.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
