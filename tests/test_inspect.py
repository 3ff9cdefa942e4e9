"""``joynr-sim trace`` on a small hand-written run."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from joynr_sim.cli import main

T0 = 1_700_000_000_000


class _Run:
    """Writes trace events as runtimes do: one file per runtime, a sequence per runtime."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "runs" / "r1"
        (self.dir / "trace").mkdir(parents=True)
        self.seq: dict[str, int] = defaultdict(int)
        self.lines: dict[str, list[str]] = defaultdict(list)

    def ev(self, rt: str, ev: str, ts: int = 0, **fields: object) -> None:
        kind = "libjoynr" if rt.startswith("app") else "runner" if rt == "runner" else "cluster-controller"
        event = {"v": 1, "ts": T0 + ts, "seq": self.seq[rt], "run": "r1", "rt": rt, "kind": kind,
                 "ev": ev, **fields}
        self.seq[rt] += 1
        self.lines[rt].append(json.dumps(event))

    def msg(self, rt: str, ev: str, msg: str, hops: int, ts: int = 0, *, type: str = "rq",
            frm: str = "px-1", to: str = "prov-1", corr: str | None = "c1", **fields: object) -> None:
        self.ev(rt, ev, ts, msg=msg, type=type, to=to, hops=hops, corr=corr, **{"from": frm}, **fields)

    def out(self, rt: str, msg: str, hops: int, via: str, target: str, gbid: str | None = None,
            **kw: object) -> None:
        addr_type = {"ws": "WebSocket", "mqtt": "Mqtt", "inprocess": "InProcess"}[via]
        self.msg(rt, "msg.out", msg, hops, via=via, addr_type=addr_type, target=target, gbid=gbid,
                 resent=False, **kw)

    def inn(self, rt: str, msg: str, hops: int, via: str, gbid: str | None = None, **kw: object) -> None:
        self.msg(rt, "msg.in", msg, hops, via=via, gbid=gbid, **kw)

    def save(self) -> Path:
        for rt, lines in self.lines.items():
            (self.dir / "trace" / f"{rt}.ndjson").write_text("\n".join(lines) + "\n")
        return self.dir


def entry(type_: str, addr: str, sticky: bool = False) -> dict[str, object]:
    return {"type": type_, "addr": addr, "visible": True, "expiry": T0 + 60_000, "sticky": sticky}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    r = _Run(tmp_path)
    for rt in ("cc1", "cc2", "app1", "app2"):
        r.ev(rt, "life.start", 0, target=rt, target_kind="x")
    # Routing entries of prov-1: learned from the GCD in cc1, a refused WebSocket, a purge.
    r.ev("cc1", "rt.put", 1, participant="prov-1", policy="precedence", outcome="created",
         reason="new-participant", origin="gcd", old=None, new=entry("Mqtt", "gbid1/cc2"),
         entry=entry("Mqtt", "gbid1/cc2"))
    r.ev("cc2", "rt.put", 1, participant="prov-1", policy="precedence", outcome="created",
         reason="new-participant", origin="routing-provider", old=None,
         new=entry("WebSocketClient", "app2"), entry=entry("WebSocketClient", "app2"))
    r.ev("cc1", "rt.put", 2, participant="prov-1", policy="precedence", outcome="refused",
         reason="websocket-in-cc", origin="reply-to", old=entry("Mqtt", "gbid1/cc2"),
         new=entry("WebSocket", "ws://cc0:4242/"), entry=entry("Mqtt", "gbid1/cc2"))
    # Request and reply all within one millisecond: only the hop counter orders them, and
    # file order (app1, app2, cc1, cc2) would put app2's hop before cc1's.
    ts = 10
    r.out("app1", "m-req-1", 0, "ws", "ws://cc1:4242/", ts=ts)
    r.inn("cc1", "m-req-1", 0, "ws", ts=ts)
    r.out("cc1", "m-req-1", 1, "mqtt", "gbid1/cc2", "gbid1", ts=ts)
    r.inn("cc2", "m-req-1", 1, "mqtt", "gbid1", ts=ts)
    r.out("cc2", "m-req-1", 2, "ws", "app2", ts=ts)
    r.inn("app2", "m-req-1", 2, "ws", ts=ts)
    r.out("app2", "m-req-1", 3, "inprocess", "inprocess:1", ts=ts)
    r.msg("app2", "msg.deliver", "m-req-1", 3, ts=ts)
    rep = dict(type="rp", frm="prov-1", to="px-1")
    r.out("app2", "m-rep-1", 0, "ws", "ws://cc2:4242/", ts=ts, **rep)
    r.inn("cc2", "m-rep-1", 0, "ws", ts=ts, **rep)
    r.out("cc2", "m-rep-1", 1, "mqtt", "gbid1/cc1", "gbid1", ts=ts, **rep)
    r.inn("cc1", "m-rep-1", 1, "mqtt", "gbid1", ts=ts, **rep)
    r.out("cc1", "m-rep-1", 2, "ws", "app1", ts=ts, **rep)
    r.inn("app1", "m-rep-1", 2, "ws", ts=ts, **rep)
    r.msg("app1", "msg.deliver", "m-rep-1", 3, ts=ts, **rep)
    # A one-way that waits for a route in cc1 and expires there.
    lost = dict(type="o", to="gone-9", corr=None)
    r.out("app1", "m-lost-2", 0, "ws", "ws://cc1:4242/", ts=20, **lost)
    r.inn("cc1", "m-lost-2", 0, "ws", ts=20, **lost)
    r.msg("cc1", "msg.queue", "m-lost-2", 1, ts=20, reason="no-route", **lost)
    r.msg("cc1", "msg.drop", "m-lost-2", 1, ts=900, reason="expired", **lost)
    # A loop between the two cluster controllers, ended by the hop limit.
    loop = dict(to="prov-1", corr="c3")
    r.out("cc1", "m-loop-3", 1, "mqtt", "gbid1/cc2", "gbid1", ts=30, **loop)
    r.inn("cc2", "m-loop-3", 1, "mqtt", "gbid1", ts=30, **loop)
    r.out("cc2", "m-loop-3", 2, "mqtt", "gbid1/cc1", "gbid1", ts=30, **loop)
    r.inn("cc1", "m-loop-3", 2, "mqtt", "gbid1", ts=30, **loop)
    r.msg("cc1", "msg.drop", "m-loop-3", 3, ts=30, reason="hop-limit", **loop)
    # A message that leaves cc2 and is never received.
    r.out("cc2", "m-void-4", 0, "mqtt", "gbid2/cc3", "gbid2", ts=40, to="far-5", corr=None)
    r.ev("cc1", "rt.purge", 1000, participant="prov-1", policy="precedence", outcome="removed",
         reason="expired", old=entry("Mqtt", "gbid1/cc2"))
    r.ev("runner", "step", 1000, index=3, name="call px.echo", outcome="failed", detail="timeout")
    r.ev("runner", "step", 1001, index=4, name="crash app2", outcome="ok", detail=None)
    return r.save()


def _trace(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
           *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("COLUMNS", "220")
    code = main(["trace", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _index(lines: list[str], needle: str) -> int:
    return next(i for i, line in enumerate(lines) if needle in line)


def test_message_hops_in_hop_order_with_runtime_columns(run_dir, capsys, monkeypatch) -> None:
    code, out, _ = _trace(capsys, monkeypatch, str(run_dir), "--msg", "m-req-1")
    assert code == 0
    lines = out.splitlines()
    header = lines[0]
    # columns in the order the runtimes appear on the message's path
    positions = [header.index(rt) for rt in ("app1", "cc1", "cc2", "app2")]
    assert positions == sorted(positions)
    req = _index(lines, "rq m-req-1")
    hop0 = _index(lines, "h0 ")
    hop1 = _index(lines, "mqtt gbid1 ─▶")
    deliver = _index(lines, "deliver at app2 to prov-1")
    rep = _index(lines, "rp m-rep-1")
    back = _index(lines, "◀ mqtt gbid1")
    delivered = _index(lines, "deliver at app1 to px-1")
    assert req < hop0 < hop1 < deliver < rep < back < delivered
    # the request's first hop runs from app1's lifeline to cc1's
    arrow = lines[hop0]
    assert arrow.index("│") < arrow.index("ws") < arrow.index("▶")
    assert arrow.index("▶") == positions[1] + len("cc1") // 2 - 1
    assert "hops" in out and "msg.deliver" in out


def test_reply_id_shows_the_request_first(run_dir, capsys, monkeypatch) -> None:
    code, out, _ = _trace(capsys, monkeypatch, str(run_dir), "--msg", "m-rep-1")
    assert code == 0
    assert out.index("rq m-req-1") < out.index("rp m-rep-1")


def test_message_prefix(run_dir, capsys, monkeypatch) -> None:
    code, out, _ = _trace(capsys, monkeypatch, str(run_dir), "--msg", "m-los")
    assert code == 0
    lines = out.splitlines()
    assert _index(lines, "o m-lost-2") < _index(lines, "queue at cc1: no-route") < _index(
        lines, "drop at cc1: expired")
    assert "no reply" not in out  # a one-way has none


def test_loop_is_drawn_back_and_forth_until_the_hop_limit(run_dir, capsys, monkeypatch) -> None:
    code, out, _ = _trace(capsys, monkeypatch, str(run_dir), "--msg", "m-loop")
    assert code == 0
    lines = out.splitlines()
    assert _index(lines, "mqtt gbid1 ─▶") < _index(lines, "◀ mqtt gbid1") < _index(
        lines, "drop at cc1: hop-limit")
    assert "no reply in the trace" in out


def test_message_never_received(run_dir, capsys, monkeypatch) -> None:
    code, out, _ = _trace(capsys, monkeypatch, str(run_dir), "--msg", "m-void")
    assert code == 0
    assert "sent by cc2 to gbid2/cc3, never received" in out


def test_ambiguous_and_unknown_message_ids(run_dir, capsys, monkeypatch) -> None:
    code, _, err = _trace(capsys, monkeypatch, str(run_dir), "--msg", "m-re")
    assert code == 2 and "ambiguous" in err and "m-rep-1" in err and "m-req-1" in err
    code, _, err = _trace(capsys, monkeypatch, str(run_dir), "--msg", "m-req-2")
    assert code == 2 and "no message with id 'm-req-2'" in err and "did you mean m-req-1" in err


def test_run_summary(run_dir, capsys, monkeypatch) -> None:
    code, out, _ = _trace(capsys, monkeypatch, str(run_dir))
    assert code == 0
    lines = out.splitlines()
    for rt in ("cc1", "cc2", "app1", "app2", "runner"):
        assert any(line.lstrip("│ ").startswith(rt) for line in lines), rt
    drops = _index(lines, "drops by reason")
    assert "expired" in out[out.index("drops by reason"):]
    assert any("hop-limit" in line for line in lines[drops:])
    assert "steps: 1 ok, 1 failed" in out and "step 3 call px.echo: timeout" in out
    lost = out[out.index("did not reach their target"):]
    for m in ("m-lost-2", "m-loop-3", "m-void-4"):
        assert m[:8] in lost
    assert "m-req-1" not in lost and "m-rep-1" not in lost
    assert "dropped: expired" in lost and "dropped: hop-limit" in lost
    assert "sent, not received" in lost


def test_participant_history(run_dir, capsys, monkeypatch) -> None:
    code, out, _ = _trace(capsys, monkeypatch, str(run_dir), "--participant", "prov-1")
    assert code == 0
    lines = out.splitlines()
    created = _index(lines, "∅ → Mqtt gbid1/cc2")
    refused = _index(lines, "refused")
    purged = _index(lines, "rt.purge")
    assert created < refused < purged
    assert "gcd" in lines[created] and "cc1" in lines[created]
    assert "offered WebSocket ws://cc0:4242/" in lines[refused]
    assert "websocket-in-cc" in lines[refused]
    assert "WebSocketClient app2" in out
    messages = out[out.index("messages from or to prov-1"):]
    assert "m-req-1" in messages and "m-rep-1" in messages and "m-lost-2" not in messages


def test_runtime_summary(run_dir, capsys, monkeypatch) -> None:
    code, out, _ = _trace(capsys, monkeypatch, str(run_dir), "--runtime", "cc1")
    assert code == 0
    assert "cc1 (cluster-controller)" in out
    assert "rt.put" in out and "created 1, refused 1" in out
    assert "life.start" in out
    assert "m-lost-2" in out and "m-req-1" not in out


@pytest.mark.parametrize("option, value, words", [
    ("--runtime", "cc9", "runtime 'cc9' wrote no events"),
    ("--participant", "prov-2", "did you mean prov-1"),
])
def test_unknown_runtime_or_participant(run_dir, capsys, monkeypatch, option, value, words) -> None:
    code, _, err = _trace(capsys, monkeypatch, str(run_dir), option, value)
    assert code == 2 and words in err


def test_missing_run_and_empty_run(tmp_path, capsys, monkeypatch) -> None:
    code, _, err = _trace(capsys, monkeypatch, str(tmp_path / "nope"))
    assert code == 2 and "no such run directory" in err
    (tmp_path / "empty" / "trace").mkdir(parents=True)
    code, _, err = _trace(capsys, monkeypatch, str(tmp_path / "empty"))
    assert code == 2 and "no trace files" in err


def test_run_id_and_trace_folder_are_accepted(run_dir, capsys, monkeypatch) -> None:
    monkeypatch.chdir(run_dir.parent.parent)
    assert _trace(capsys, monkeypatch, "r1", "--msg", "m-req")[0] == 0
    assert _trace(capsys, monkeypatch, str(run_dir / "trace"), "--runtime", "cc2")[0] == 0


def test_options_exclude_each_other(run_dir, capsys, monkeypatch) -> None:
    with pytest.raises(SystemExit) as info:
        _trace(capsys, monkeypatch, str(run_dir), "--msg", "m", "--runtime", "cc1")
    assert info.value.code == 2
