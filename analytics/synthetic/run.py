"""Synthetic traces: one run's realistic traffic and its planted violations."""

from __future__ import annotations

from .plants import Plants
from .writer import CCS, EXPIRY, GBIDS, LIBS, T0, TTL, Writer, ent


def _lib_cc(lib: int) -> int:
    return lib % CCS


class Run(Plants):
    def __init__(self, w: Writer) -> None:
        self.w = w
        self.conn: dict[tuple[int, str], str] = {}
        self.conn_n = 0
        self.reply_to: dict[tuple[int, str], tuple[str, int]] = {}  # (cc, proxy) -> addr, expiry
        self.gcd_routes: dict[tuple[int, str], tuple[str, int]] = {}
        self.short: dict[int, tuple[int, str]] = {}  # short-lived entries: i -> (cc, entry)

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
        w.expire_in(TTL)
        if i % 40 == 7:
            self.hairpin(i, p)
            return
        if i % 200 == 99:
            self.refused_send(i, p, q_, g)
            return
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
        if i % 300 == 150:  # a second copy over MQTT, dropped as a duplicate: the first arrived
            w.msg(cb, "msg.drop", m, "rq", proxy, prov, 2, c, reason="duplicate")
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

    def hairpin(self, i: int, p: int) -> None:
        """A proxy calls a provider of its own runtime through its cluster controller, which
        hands the request straight back: a return that is no loop."""
        w = self.w
        a, lp = _lib_cc(p), f"lib-{p}"
        ca, proxy, prov, m, r, c = f"cc-{a}", f"proxy-{p}", f"prov-{p}", f"q{i}", f"p{i}", f"c{i}"
        w.msg(lp, "msg.out", m, "rq", proxy, prov, 1, c, "ws", None, f"ws://{ca}:4242/", "WebSocket")
        w.msg(ca, "msg.in", m, "rq", proxy, prov, 1, c, "ws")
        w.msg(ca, "msg.out", m, "rq", proxy, prov, 2, c, "ws", None, lp, "WebSocketClient")
        w.msg(lp, "msg.in", m, "rq", proxy, prov, 2, c, "ws")
        w.msg(lp, "msg.out", m, "rq", proxy, prov, 3, c, "inprocess", None, f"inprocess:{p}", "InProcess")
        w.msg(lp, "msg.deliver", m, "rq", proxy, prov, 3, c)
        w.msg(lp, "msg.out", r, "rp", prov, proxy, 1, c, "inprocess", None, f"inprocess:{p}", "InProcess")
        w.msg(lp, "msg.deliver", r, "rp", prov, proxy, 1, c)

    def refused_send(self, i: int, p: int, q_: int, g: str) -> None:
        """The transport refuses a request at the sender: recorded there, with or without
        the send it refused."""
        w = self.w
        a, b, lp = _lib_cc(p), _lib_cc(q_), f"lib-{p}"
        ca, proxy, prov, m, c = f"cc-{a}", f"proxy-{p}", f"prov-{q_}", f"q{i}", f"c{i}"
        w.msg(lp, "msg.out", m, "rq", proxy, prov, 1, c, "ws", None, f"ws://{ca}:4242/", "WebSocket")
        w.msg(ca, "msg.in", m, "rq", proxy, prov, 1, c, "ws")
        if i % 400 == 99:
            w.msg(ca, "msg.out", m, "rq", proxy, prov, 2, c, "mqtt", g, f"{g}/cc-{b}", "Mqtt")
        w.msg(ca, "msg.drop", m, "rq", proxy, prov, 2, c, reason="no-connection")

    def end(self) -> None:
        """The run ends as every real run does: a request still on its way when the graceful
        stops come (its receiver stops before it expires: no loss), then the stops,
        libjoynr runtimes first, brokers last."""
        w = self.w
        w.expire_in(TTL)
        w.msg("lib-0", "msg.out", "last", "rq", "proxy-0", "prov-1", 1, "lastc", "ws", None,
              "ws://cc-0:4242/", "WebSocket")
        w.msg("cc-0", "msg.in", "last", "rq", "proxy-0", "prov-1", 1, "lastc", "ws")
        w.msg("cc-0", "msg.out", "last", "rq", "proxy-0", "prov-1", 2, "lastc", "mqtt", "g-a",
              "g-a/cc-1", "Mqtt")
        for target in ([f"lib-{n}" for n in range(LIBS)] + [f"cc-{n}" for n in range(CCS)]
                       + [f"gcd-{g}" for g in GBIDS]):
            w.life("life.stop", target)
        for g in GBIDS:
            w.life("life.stop", f"broker-{g}", f',"gbid":"{g}"')

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
        self.short[i] = (b, e)
        if i - 300 in self.short:  # expired long ago: purged, as the table held it
            cc, gone = self.short.pop(i - 300)
            w.emit(f"cc-{cc}", "rt.purge", f'"participant":"tmp-{i - 300}","policy":"precedence",'
                   f'"outcome":"removed","reason":"expired","old":{gone},"entry":null')
