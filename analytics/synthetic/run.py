"""Synthetic traces: one run's realistic traffic and its planted violations."""

from __future__ import annotations

from .writer import CCS, EXPIRY, GBIDS, HOP_LIMIT, LIBS, T0, TTL, Writer, ent


def _lib_cc(lib: int) -> int:
    return lib % CCS


class Run:
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
        # back at cc-0, which had routed it, and queued there until it expires: a loop too
        ghost, m = f"ghost-back-{j}", f"back{j}"
        e = ent("Mqtt", "g-b/cc-2", w.t + EXPIRY)
        w.put("cc-0", ghost, "created", "gcd", None, e, e)
        e = ent("Mqtt", "g-b/cc-0", w.t + EXPIRY)
        w.put("cc-2", ghost, "created", "gcd", None, e, e)
        w.msg("lib-0", "msg.out", m, "rq", "proxy-0", ghost, 1, f"bc-{j}", "ws", None,
              "ws://cc-0:4242/", "WebSocket")
        w.msg("cc-0", "msg.in", m, "rq", "proxy-0", ghost, 1, f"bc-{j}", "ws")
        w.msg("cc-0", "msg.out", m, "rq", "proxy-0", ghost, 2, f"bc-{j}", "mqtt", "g-b", "g-b/cc-2", "Mqtt")
        w.msg("cc-2", "msg.in", m, "rq", "proxy-0", ghost, 2, f"bc-{j}", "mqtt", "g-b")
        w.msg("cc-2", "msg.out", m, "rq", "proxy-0", ghost, 3, f"bc-{j}", "mqtt", "g-b", "g-b/cc-0", "Mqtt")
        w.msg("cc-0", "msg.in", m, "rq", "proxy-0", ghost, 3, f"bc-{j}", "mqtt", "g-b")
        w.msg("cc-0", "msg.queue", m, "rq", "proxy-0", ghost, 4, f"bc-{j}", reason="no-route")
        w.msg("cc-0", "msg.drop", m, "rq", "proxy-0", ghost, 4, f"bc-{j}", reason="expired")
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
        pigeon = '{"type":"Carrier","addr":"pigeon","visible":false,"expiry":1,"sticky":false}'
        s = w.put(rt, f"{p}-h", "created", "gcd", None, pigeon, pigeon)  # no rule judges it
        w.plant("overwrite-violation", rt, s)
        shown = ent("Mqtt", "g-a/cc-3", exp, visible=True)
        s = w.put(rt, f"{p}-i", "created", "gcd", None, shown, mq)  # visibility not offered
        w.plant("overwrite-violation", rt, s)
        w.put(rt, f"{p}-j", "created", "registration", None, wsc, wsc)
        s = w.put(rt, f"{p}-j", "merged", "gcd", mq, mq, mq)  # old is not what the table held
        w.plant("overwrite-violation", rt, s)
        # look-alikes: a sticky entry correctly kept, a correct refusal of a remove
        w.put(rt, f"{p}-g", "created", "provisioned", None, sticky, sticky)
        w.put(rt, f"{p}-g", "refused", "gcd", sticky, ent("Mqtt", "g-a/cc-1", exp), sticky)
        w.emit(rt, "rt.remove", f'"participant":"{p}-g","policy":"precedence",'
               f'"outcome":"refused-sticky","old":{sticky},"entry":{sticky}')

    def plant_lost(self, j: int) -> None:
        w = self.w
        w.expire_in(100)  # and a lull below: the final stops come too late to explain these
        m, c = f"lost{j}", f"lostc{j}"
        w.msg("lib-1", "msg.out", m, "rq", "proxy-1", "prov-2", 1, c, "ws", None,
              "ws://cc-1:4242/", "WebSocket")
        w.msg("cc-1", "msg.in", m, "rq", "proxy-1", "prov-2", 1, c, "ws")
        w.msg("cc-1", "msg.out", m, "rq", "proxy-1", "prov-2", 2, c, "mqtt", "g-a", "g-a/cc-2", "Mqtt")
        w.msg("cc-2", "msg.in", m, "rq", "proxy-1", "prov-2", 2, c, "mqtt", "g-a")
        w.msg("cc-2", "msg.out", m, "rq", "proxy-1", "prov-2", 3, c, "ws", None, "lib-2", "WebSocketClient")
        w.msg("lib-2", "msg.in", m, "rq", "proxy-1", "prov-2", 3, c, "ws")
        w.msg("lib-2", "msg.deliver", m, "rq", "proxy-1", "prov-2", 3, c)  # and no reply, ever
        w.plant("lost-message", "lost-request", m)
        m, c = f"dup{j}", f"dupc{j}"
        w.msg("lib-5", "msg.out", m, "o", "proxy-5", "prov-6", 1, None, "ws", None,
              "ws://cc-1:4242/", "WebSocket")
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
        # only a duplicate drop: the first copy's fate is still owed
        m, c = f"dupdrop{j}", f"dupdropc{j}"
        w.msg("lib-1", "msg.out", m, "rq", "proxy-1", "prov-3", 1, c, "ws", None,
              "ws://cc-1:4242/", "WebSocket")
        w.msg("cc-1", "msg.in", m, "rq", "proxy-1", "prov-3", 1, c, "ws")
        w.msg("cc-1", "msg.drop", m, "rq", "proxy-1", "prov-3", 2, c, reason="duplicate")
        w.plant("lost-message", "lost-request", m)
        w.advance(1000)

    def plant_late(self, j: int) -> None:
        """Losses a stop does not explain: one after the message expired, one after a later
        message on the same way had arrived."""
        w = self.w
        m, c = f"late{j}", f"latec{j}"
        w.expire_in(50)
        w.msg("lib-1", "msg.out", m, "rq", "proxy-1", "prov-2", 1, c, "ws", None,
              "ws://cc-1:4242/", "WebSocket")
        w.msg("cc-1", "msg.in", m, "rq", "proxy-1", "prov-2", 1, c, "ws")
        w.msg("cc-1", "msg.out", m, "rq", "proxy-1", "prov-2", 2, c, "mqtt", "g-a", "g-a/cc-2", "Mqtt")
        w.msg("cc-2", "msg.in", m, "rq", "proxy-1", "prov-2", 2, c, "mqtt", "g-a")
        w.plant("lost-message", "lost-request", m)
        w.expire_in(TTL)
        m = f"overtaken{j}"
        w.msg("cc-3", "msg.out", m, "o", "proxy-3", "prov-0", 2, None, "mqtt", "g-b", "g-b/cc-0", "Mqtt")
        w.plant("lost-message", "vanished-hop", m, 2, "cc-3")
        m = f"later{j}"
        w.msg("cc-3", "msg.out", m, "o", "proxy-3", "prov-0", 2, None, "mqtt", "g-b", "g-b/cc-0", "Mqtt")
        w.msg("cc-0", "msg.in", m, "o", "proxy-3", "prov-0", 2, None, "mqtt", "g-b")
        w.msg("cc-0", "msg.out", m, "o", "proxy-3", "prov-0", 3, None, "ws", None, "lib-0", "WebSocketClient")
        w.msg("lib-0", "msg.in", m, "o", "proxy-3", "prov-0", 3, None, "ws")
        w.msg("lib-0", "msg.deliver", m, "o", "proxy-3", "prov-0", 3, None)
        w.advance(100)
        w.life("life.crash", "cc-2")  # too late for late{j}, which expired 50 ms after it left
        w.life("life.restart", "cc-2", ',"gbids":["g-a","g-b"],"own_topics":["cc-2"]')
        self.attach_all(2, "establish")

    def plant_crash(self, j: int) -> None:
        """Look-alikes only: losses a crash of cc-3 explains."""
        w = self.w
        m, c = f"crash{j}", f"crashc{j}"
        w.msg("lib-0", "msg.out", m, "rq", "proxy-0", "prov-3", 1, c, "ws", None,
              "ws://cc-0:4242/", "WebSocket")
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


PLANTS = ("plant_loop", "plant_overwrites", "plant_lost", "plant_late", "plant_gcd", "plant_links",
          "plant_crash")
