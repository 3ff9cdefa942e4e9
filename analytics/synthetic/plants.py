"""Synthetic traces: the planted violations of every check, and look-alikes that are not."""

from __future__ import annotations

from .writer import EXPIRY, HOP_LIMIT, TTL, Writer, ent


class Plants:
    """Mixed into ``Run``: each plant writes its violations and records their keys."""

    w: Writer

    def attach_all(self, c: int, mode: str) -> None:
        raise NotImplementedError

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
        """A crash of cc-3, which comes back: it explains the request cc-3 held, not the
        hop via MQTT that was on its way to it (its broker owes it to cc-3's session)."""
        w = self.w
        m, c = f"crash{j}", f"crashc{j}"
        w.msg("lib-0", "msg.out", m, "rq", "proxy-0", "prov-3", 1, c, "ws", None,
              "ws://cc-0:4242/", "WebSocket")
        w.msg("cc-0", "msg.in", m, "rq", "proxy-0", "prov-3", 1, c, "ws")
        w.msg("cc-0", "msg.out", m, "rq", "proxy-0", "prov-3", 2, c, "mqtt", "g-a", "g-a/cc-3", "Mqtt")
        w.msg("cc-3", "msg.in", m, "rq", "proxy-0", "prov-3", 2, c, "mqtt", "g-a")
        w.expire_in(10)  # expired long before any broker ends: only the crash is in its flight
        m = f"crasho{j}"
        w.msg("cc-0", "msg.out", m, "o", "proxy-0", "prov-3", 2, None, "mqtt", "g-b", "g-b/cc-3", "Mqtt")
        w.plant("lost-message", "vanished-hop", m, 2, "cc-0")
        w.expire_in(TTL)
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


    def plant_multicast(self, j: int) -> None:
        w = self.w
        prov, mid = f"mprov-{j}", f"mprov-{j}/incremented"
        topic = f"g-a/joynr-sim-multicast/{mid}"
        # echoed: cc-1 publishes what it received and gets it back (a routing loop as well)
        m = f"echo{j}"
        w.msg("cc-0", "msg.out", m, "m", prov, mid, 2, None, "mqtt", "g-a", topic, "Mqtt")
        w.msg("cc-1", "msg.in", m, "m", prov, mid, 2, None, "mqtt", "g-a")
        w.msg("cc-1", "msg.out", m, "m", prov, mid, 3, None, "mqtt", "g-a", topic, "Mqtt")
        w.msg("cc-1", "msg.in", m, "m", prov, mid, 3, None, "mqtt", "g-a")
        w.plant("multicast", m, "cc-1")
        w.plant("routing-loop", m)
        # one publication handed twice to one subscription; once each to two is no violation
        for sid in ("s1", "s1", "s2"):
            w.emit("lib-1", "sub.publication", f'"sid":"{sid}-{j}","msg":"pub{j}","outcome":"delivered"')
        w.plant("multicast", "lib-1", f"s1-{j}", f"pub{j}")
        # a provider that is not globally visible, its multicast published all the same
        m = f"leak{j}"
        w.emit("lib-0", "mc.fire", f'"multicast":"{mid}","provider":"{prov}","msg":"{m}","visible":false')
        w.msg("cc-0", "msg.out", m, "m", prov, mid, 2, None, "mqtt", "g-a", topic, "Mqtt")
        w.plant("multicast", m)
        # look-alikes: a visible provider's multicast published once and received elsewhere
        m = f"fine{j}"
        w.emit("lib-0", "mc.fire", f'"multicast":"{mid}","provider":"{prov}","msg":"{m}","visible":true')
        w.msg("cc-0", "msg.out", m, "m", prov, mid, 2, None, "mqtt", "g-a", topic, "Mqtt")
        w.msg("cc-2", "msg.in", m, "m", prov, mid, 2, None, "mqtt", "g-a")

    def plant_lost_session(self, j: int) -> None:
        """A broker crash that lost every session (as amqtt's): what reached it before the
        receiver had subscribed again is explained, what came after is not. And a broker
        stop that kept the sessions (as Mosquitto's with persistence): it explains nothing."""
        w = self.w
        w.expire_in(100)  # and a lull below: the final stops come too late to explain these
        w.life("life.crash", "broker-g-a", ',"gbid":"g-a"')
        w.life("life.restart", "broker-g-a", ',"gbid":"g-a"')
        w.attach("cc-0", "g-a", "cc-0", self.conn[(0, "g-a")], "establish")  # the sender first
        m, c = f"unsub{j}", f"unsubc{j}"  # look-alike: cc-1 has not subscribed again yet
        w.msg("lib-0", "msg.out", m, "rq", "proxy-0", "prov-1", 1, c, "ws", None,
              "ws://cc-0:4242/", "WebSocket")
        w.msg("cc-0", "msg.in", m, "rq", "proxy-0", "prov-1", 1, c, "ws")
        w.msg("cc-0", "msg.out", m, "rq", "proxy-0", "prov-1", 2, c, "mqtt", "g-a", "g-a/cc-1", "Mqtt")
        for cc in (1, 2, 3):
            w.attach(f"cc-{cc}", "g-a", f"cc-{cc}", self.conn[(cc, "g-a")], "establish")
        m = f"resub{j}"  # after cc-1's subscription was back: lost
        w.msg("cc-0", "msg.out", m, "o", "proxy-0", "prov-1", 2, None, "mqtt", "g-a", "g-a/cc-1", "Mqtt")
        w.plant("lost-message", "vanished-hop", m, 2, "cc-0")
        w.life("life.stop", "broker-g-b", ',"gbid":"g-b"')
        w.life("life.restart", "broker-g-b", ',"gbid":"g-b"')
        w.attach("cc-0", "g-b", "cc-0", self.conn[(0, "g-b")], "reattach")
        m = f"kept{j}"  # before cc-2 attached, but the broker had kept its session: lost
        w.msg("cc-0", "msg.out", m, "o", "proxy-0", "prov-2", 2, None, "mqtt", "g-b", "g-b/cc-2", "Mqtt")
        for cc in (1, 2, 3):
            w.attach(f"cc-{cc}", "g-b", f"cc-{cc}", self.conn[(cc, "g-b")], "reattach")
        w.plant("lost-message", "vanished-hop", m, 2, "cc-0")
        w.advance(1000)


PLANTS = ("plant_loop", "plant_overwrites", "plant_lost", "plant_late", "plant_gcd", "plant_links",
          "plant_crash", "plant_multicast", "plant_lost_session")
