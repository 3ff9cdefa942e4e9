"""The rule table read from the seeds, spot-checked against the seed sentences."""

from __future__ import annotations

from analytics import rules

ROW = ("judged", "kind", "old_type", "new_type", *rules.PUT_FLAGS, "expected", "rule", "seed")


def verdicts(**fixed) -> set[str]:
    table = [dict(zip(ROW, r)) for r in rules.put_rule_rows()]
    return {r["expected"] for r in table if all(r[k] == v for k, v in fixed.items())}


def test_precedence_type_order_per_runtime_kind():
    cc, lib = "cluster-controller", "libjoynr"
    plain = dict(judged="precedence", same_routing=False, same_addr=False, old_sticky=False,
                 own_topic=False)
    # InProcess > WebSocketClient > Mqtt/Channel > WebSocket in a cluster controller
    assert verdicts(kind=cc, old_type="WebSocketClient", new_type="Mqtt", **plain) == {"refuse"}
    assert verdicts(kind=cc, old_type="WebSocket", new_type="Mqtt", **plain) == {"accept"}
    assert verdicts(kind=cc, old_type="Mqtt", new_type="WebSocket", **plain) == {"refuse"}
    # InProcess > WebSocket > WebSocketClient > Mqtt/Channel in libjoynr
    assert verdicts(kind=lib, old_type="WebSocketClient", new_type="WebSocket", **plain) == {"accept"}
    assert verdicts(kind=lib, old_type="WebSocket", new_type="WebSocketClient", **plain) == {"refuse"}
    for kind in rules.KINDS:
        assert verdicts(kind=kind, old_type="InProcess", new_type="Channel", **plain) == {"refuse"}
        assert verdicts(kind=kind, new_type="InProcess", **plain) == {"accept"}
        assert verdicts(kind=kind, old_type="Mqtt", new_type="Channel", **plain) == {"accept"}


def test_precedence_sticky_merge_and_own_topic():
    base = dict(judged="precedence", kind="cluster-controller")
    assert verdicts(**base, old_sticky=True, same_routing=False, own_topic=False,
                    old_type="Mqtt") == {"refuse"}
    assert verdicts(**base, old_sticky=True, same_routing=True, own_topic=False) == {"accept"}
    assert verdicts(**base, own_topic=True) == {"refuse"}
    assert verdicts(**base, old_type=rules.NONE, own_topic=False) == {"accept"}


def test_local_remote_and_gcd_trust():
    lr = dict(judged="local-remote", same_routing=False)
    for local in ("InProcess", "WebSocket", "WebSocketClient"):
        assert verdicts(**lr, old_type=local, new_type="Mqtt") == {"refuse"}
        assert verdicts(**lr, old_type="Channel", new_type=local) == {"accept"}
    # 002 knows no own topics: creating such an entry is allowed
    assert verdicts(judged="local-remote", own_topic=True, old_type=rules.NONE) == {"accept"}
    gt = dict(judged="gcd-trust", new_expired=False, new_sticky=False, same_addr=False)
    assert verdicts(**gt, from_gcd=True) == {"accept"}
    assert verdicts(**gt, from_gcd=False, old_type="Mqtt") == {"refuse"}
    assert verdicts(judged="gcd-trust", new_expired=True) == {"refuse"}


def test_delete_rules():
    table = {(p, op, s, e): x for p, op, s, e, x, *_ in rules.delete_rule_rows()}
    assert table[("precedence", "remove", True, False)] == "refuse"
    assert table[("local-remote", "remove", True, False)] == "accept"
    assert table[("gcd-trust", "remove", True, True)] == "accept"
    assert table[("precedence", "purge", False, False)] == "refuse"
    assert {table[(p, "purge", False, True)] for p in rules.JUDGED} == {"accept"}
