"""Helpers of the analytics tests: a tiny builder of run directories (trace files with
per-runtime sequence numbers, run.json) and one-check runs. The ``spark`` fixture is in
``conftest.py``."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

KINDS = {"cc": "cluster-controller", "lib": "libjoynr", "gcd": "gcd", "broker": "broker",
         "runner": "runner"}


def entry(type_: str, addr: str, *, visible: bool = False, expiry: int = 10_000,
          sticky: bool = False) -> dict:
    return {"type": type_, "addr": addr, "visible": visible, "expiry": expiry, "sticky": sticky}


class RunBuilder:
    """Events of one run; ``add`` numbers them per runtime like the trace writer does."""

    def __init__(self, run: str = "run-1", policy: str | None = "precedence") -> None:
        self.run = run
        self.policy = policy
        self.events: list[dict] = []
        self._seq: dict[str, int] = defaultdict(int)

    def add(self, rt: str, ev: str, ts: int, **fields) -> dict:
        kind = KINDS.get(rt.split("-")[0], "runner")
        event = {"v": 1, "ts": ts, "seq": self._seq[rt], "run": self.run, "rt": rt,
                 "kind": kind, "ev": ev, **fields}
        self._seq[rt] += 1
        self.events.append(event)
        return event

    def msg(self, rt: str, ev: str, ts: int, msg: str, type_: str = "rq", *, hops: int = 1,
            via: str | None = None, to: str = "prov", corr: str | None = None, **fields) -> dict:
        base = {"msg": msg, "type": type_, "from": "proxy", "to": to, "hops": hops, "corr": corr}
        if ev in ("msg.out", "msg.in"):
            base["via"] = via
            base.setdefault("gbid", fields.pop("gbid", None))
        if ev == "msg.out":
            base.update(resent=fields.pop("resent", False), addr_type=fields.pop("addr_type", None),
                        target=fields.pop("target", None))
        return self.add(rt, ev, ts, **base, **fields)

    def put(self, rt: str, ts: int, participant: str, old: dict | None, new: dict,
            outcome: str, entry_after: dict | None = None, origin: str = "local",
            reason: str = "") -> dict:
        if entry_after is None:
            entry_after = old if outcome == "refused" else new
        return self.add(rt, "rt.put", ts, participant=participant, policy=self.policy,
                        outcome=outcome, reason=reason, origin=origin, old=old, new=new,
                        entry=entry_after)

    def write(self, root: Path, extra_lines: dict[str, str] | None = None) -> Path:
        """Writes ``root/<run>/``; ``extra_lines`` appends raw text to a runtime's file."""
        run_dir = root / self.run
        (run_dir / "trace").mkdir(parents=True, exist_ok=True)
        manifest = {} if self.policy is None else {"policy": self.policy}
        (run_dir / "run.json").write_text(json.dumps({"run": self.run, **manifest}))
        by_rt: dict[str, list[str]] = defaultdict(list)
        for e in self.events:
            by_rt[e["rt"]].append(json.dumps(e))
        for rt in set(by_rt) | set(extra_lines or {}):
            text = "".join(line + "\n" for line in by_rt.get(rt, []))
            text += (extra_lines or {}).get(rt, "")
            (run_dir / "trace" / f"{rt}.ndjson").write_text(text)
        return run_dir


def check(spark, tmp_path: Path, builders: list[RunBuilder], name: str, **kwargs):
    """Writes the runs, checks them with one check, returns its CheckResult."""
    from analytics.inputs import find_runs
    from analytics.runner import check_runs

    traces = tmp_path / "runs"
    for b in builders:
        b.write(traces)
    stage = tmp_path / "stage"
    stage.mkdir()
    outcome = check_runs(spark, find_runs([str(traces)]), stage, [name], **kwargs)
    return outcome.results[0]


def keys(result) -> set[str]:
    return {v.key for v in result.violations}


def wire(b: RunBuilder, msg: str, path: list[tuple[str, str]], ts: int, *, type_: str = "rq",
         corr: str | None = None, to: str = "prov", gbid: str = "g1", deliver: bool = True,
         start_hops: int = 1, **fields) -> int:
    """A message along ``path`` = [(runtime, via to the next one)...]: out/in pairs, then
    a delivery at the last runtime; ``fields`` (``exp``...) go into every event. Returns the
    next free timestamp."""
    hops = start_hops
    for (here, via), (there, _) in zip(path, path[1:]):
        g = gbid if via == "mqtt" else None
        target = f"{g}/{there}" if via == "mqtt" else there
        b.msg(here, "msg.out", ts, msg, type_, hops=hops, via=via, to=to, corr=corr, gbid=g,
              target=target, **fields)
        b.msg(there, "msg.in", ts + 1, msg, type_, hops=hops, via=via, to=to, corr=corr, gbid=g, **fields)
        ts += 2
        hops += 1
    if deliver:
        b.msg(path[-1][0], "msg.deliver", ts, msg, type_, hops=hops - 1, to=to, corr=corr, **fields)
        ts += 1
    return ts
