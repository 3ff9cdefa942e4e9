"""joynr-sim report without a browser: what the diagrams, timelines and plots are made of,
what input is refused, and that pages go only where joynr-sim may write them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from analytics_helpers import RunBuilder, entry, wire
from joynr_sim.cli import main
from joynr_sim.inspect import load_run
from joynr_sim.report import ReportError, model, write_report
from joynr_sim.report.inputs import attach_verdicts, read_run_input
from joynr_sim.report.routing import routing


def _run(tmp_path: Path, b: RunBuilder) -> Path:
    return b.write(tmp_path / "runs")


def _looping_and_lost(b: RunBuilder) -> None:
    """m1: request delivered, reply delivered; m2: request lost on the way (sent over
    MQTT, never received); m3: dropped at the hop limit after a resent hop."""
    ts = wire(b, "m1", [("lib-a", "ws"), ("cc-1", "mqtt"), ("cc-2", "ws"), ("lib-b", "")], 100, corr="c1")
    ts = wire(b, "r1", [("lib-b", "ws"), ("cc-2", "mqtt"), ("cc-1", "ws"), ("lib-a", "")], ts, type_="rp",
              corr="c1", to="proxy")
    b.msg("cc-1", "msg.out", ts, "m2", hops=2, via="mqtt", gbid="g1", target="g1/cc-2", corr="c2")
    b.msg("cc-1", "msg.out", ts + 5, "m3", hops=31, via="mqtt", gbid="g1", target="g1/cc-1", resent=True)
    b.msg("cc-1", "msg.in", ts + 6, "m3", hops=31, via="mqtt", gbid="g1")
    b.msg("cc-1", "msg.drop", ts + 6, "m3", hops=32, reason="hop-limit")


def test_diagram_labels_hops_and_marks_what_went_wrong(tmp_path):
    b = RunBuilder()
    _looping_and_lost(b)
    run = load_run(_run(tmp_path, b))
    msgs = model.messages(run)
    by_id = {m["id"]: m for m in msgs.listed}
    assert by_id["m1"]["outcome"] == "delivered" and by_id["r1"]["conv"] == by_id["m1"]["conv"]
    assert by_id["m3"]["outcome"] == "dropped: hop-limit"

    conv = msgs.conversations[by_id["m1"]["conv"]]
    assert conv["columns"] == ["lib-a", "cc-1", "cc-2", "lib-b"]
    hops = [(r["a"], r["b"], r["label"]) for r in conv["rows"] if r["k"] == "hop"]
    assert hops[:3] == [(0, 1, "ws"), (1, 2, "mqtt g1"), (2, 3, "ws")]  # request, then the reply back
    assert [r["note"] for r in conv["rows"] if r["k"] == "mark"] == ["delivered to prov", "delivered to proxy"]

    lost = msgs.conversations[by_id["m2"]["conv"]]
    vanished = next(r for r in lost["rows"] if r["k"] == "hop")
    assert (vanished["a"], vanished["b"], vanished["s"]) == (0, None, "bad")
    assert "never received" in vanished["note"]
    assert lost["rows"][-2] == {"k": "note", "text": "no reply in the trace", "s": "warn"}
    # nothing in the trace explains it (no crash, no outage, no drop): a loss, said in red
    assert lost["rows"][-1] == {"k": "note", "text": "not explained by the trace: a lost message", "s": "bad",
                                "explained": False}
    assert lost["explained"] == ""

    loop = msgs.conversations[by_id["m3"]["conv"]]
    self_hop = next(r for r in loop["rows"] if r["k"] == "hop")
    assert (self_hop["a"], self_hop["b"], self_hop["label"]) == (0, 0, "mqtt g1 resent")
    assert next(r for r in loop["rows"] if r["k"] == "mark")["note"] == "dropped: hop-limit"

    # every exchange that did not end in a delivery and (for a request) its reply
    assert sorted(msgs.conversations[i]["ids"][0] for i in msgs.failing) == ["m2", "m3"]


def test_routing_timeline_holds_each_entry_until_it_changes_and_marks_refusals(tmp_path):
    b = RunBuilder()
    wsc, mqtt = entry("WebSocketClient", "app1", sticky=True), entry("Mqtt", "g1/cc-2", visible=True)
    b.put("cc-1", 100, "p1", None, wsc, "created")
    b.put("cc-1", 200, "p1", wsc, mqtt, "refused", reason="sticky")
    b.put("cc-2", 150, "p1", None, mqtt, "created")
    b.add("cc-2", "rt.purge", 400, participant="p1", policy="precedence", outcome="removed", reason="expired",
          old=mqtt)
    b.add("runner", "step", 500, index=0, name="s", outcome="ok", detail="", line=1)
    run = load_run(_run(tmp_path, b))
    data = routing(run)
    assert data["participants"] == ["p1"]
    spans = sorted((e["rt"], e["t0"], e["t1"], e["type"], e["sticky"]) for e in data["entries"])
    # relative to the run's first event (100): cc-1 holds its entry to the end (400), the
    # refused offer changes nothing; cc-2's entry goes with the purge
    assert spans == [("cc-1", 0, 100, "WebSocketClient", True), ("cc-1", 100, 400, "WebSocketClient", True),
                     ("cc-2", 50, 300, "Mqtt", False)]
    refused = [c for c in data["changes"] if c["refused"]]
    assert [(c["rt"], c["reason"], c["offered"]) for c in refused] == [
        ("cc-1", "sticky", "Mqtt g1/cc-2 [visible]")]
    assert data["first"] == "p1"


@pytest.mark.parametrize(("duration", "width"), [(0, 1), (59, 1), (61, 2), (600, 10), (6001, 200), (90_000, 2000)])
def test_activity_bins_are_round_and_at_most_sixty(duration, width):
    assert model.bin_width(duration) == width
    assert -(-duration // width) <= model.ACTIVITY_BINS


def _report_json(run_dir: Path, details: list[dict], *, dirs: list[str] | None = None, **check) -> Path:
    path = run_dir / "check" / "report.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    c = {"name": "routing-loop", "description": "d", "status": "fail" if details else "pass",
         "violations": len(details), "violations_listed": len(details), "notes": [], "details": details, **check}
    path.write_text(json.dumps({"schema": "joynr-sim-check/1", "runs": [{"dir": d} for d in dirs or [str(run_dir)]],
                                "checks": [c]}))
    return path


def test_a_violation_links_its_message_participant_and_slice(tmp_path):
    b = RunBuilder()
    _looping_and_lost(b)
    run_dir = _run(tmp_path, b)
    slice_file = run_dir / "check" / "slices" / "routing-loop" / "0000.ndjson"
    slice_file.parent.mkdir(parents=True)
    slice_file.write_text("".join(json.dumps(e) + "\n" for e in b.events if e.get("msg") == "m3"))
    drop = next(e for e in b.events if e["ev"] == "msg.drop")
    _report_json(run_dir, [{"run": "run-1", "key": "run-1/m3", "kind": "hop-limit", "summary": "m3 looped",
                            "details": {"to": "prov"}, "events": [{"rt": "cc-1", "seq": drop["seq"]}],
                            "slice": "slices/routing-loop/0000.ndjson"}])
    written = write_report([run_dir], out=tmp_path / "out")
    html = written.pages[0].read_text()
    # the details name no message: it comes from the event referred to; the slice is in the page
    assert 'href="#msg-m3"' in html and 'id="violation-0-slice"' in html
    assert html.count("<td>msg.drop</td>") == 1
    assert '"../runs/run-1/check/slices/routing-loop/0000.ndjson"' in html


def test_verdicts_come_from_a_sibling_run_directory_and_only_for_this_run(tmp_path):
    first, second = RunBuilder("run-a"), RunBuilder("run-b")
    _looping_and_lost(first)
    _looping_and_lost(second)
    a, bdir = _run(tmp_path, first), _run(tmp_path, second)
    _report_json(a, [{"run": "run-b", "key": "run-b/m3", "kind": "hop-limit", "summary": "m3 looped"}],
                 dirs=["runs/run-a", "runs/run-b"])  # relative, as the checker keeps them
    run_a, run_b = read_run_input(a), read_run_input(bdir)
    attach_verdicts(run_a, [])
    attach_verdicts(run_b, [])
    assert [(v.name, v.status, len(v.violations)) for v in run_a.verdicts] == [("routing-loop", "pass", 0)]
    assert [(v.name, v.status, len(v.violations)) for v in run_b.verdicts] == [("routing-loop", "fail", 1)]


def test_a_slice_outside_the_checkers_folder_is_not_read(tmp_path):
    b = RunBuilder()
    _looping_and_lost(b)
    run_dir = _run(tmp_path, b)
    (tmp_path / "secret.ndjson").write_text(json.dumps(b.events[0]) + "\n")
    _report_json(run_dir, [{"run": "run-1", "key": "k", "kind": "x", "summary": "s",
                            "slice": "../../../secret.ndjson"}])
    run = read_run_input(run_dir)
    attach_verdicts(run, [])
    violation = run.verdicts[0].violations[0]
    assert violation.slice_file is None and violation.slice_events == ()


@pytest.mark.parametrize(("content", "message"), [
    ({"scenario": "s", "seed": "12"}, "run.json: seed: expected int, got '12'"),
    ({"steps": [{"index": 0, "title": "t", "outcome": 1}]}, "run.json: steps[0].outcome: expected str, got 1"),
    ([], "run.json: expected a JSON object, got []"),
])
def test_a_run_json_of_the_wrong_shape_is_named_with_field_and_value(tmp_path, content, message):
    b = RunBuilder()
    _looping_and_lost(b)
    run_dir = _run(tmp_path, b)
    (run_dir / "run.json").write_text(json.dumps(content))
    with pytest.raises(ReportError, match=message.replace("[", r"\[").replace("]", r"\]")):
        write_report([run_dir], out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_check_report_of_the_wrong_shape_is_refused(tmp_path):
    b = RunBuilder()
    _looping_and_lost(b)
    run_dir = _run(tmp_path, b)
    path = _report_json(run_dir, [{"run": "run-1", "key": "k", "kind": "x", "summary": "s",
                                   "events": [{"rt": "cc-1", "seq": "3"}]}])
    with pytest.raises(ReportError, match=r"details\[0\]\.events\[0\]\.seq: expected int, got '3'"):
        write_report([run_dir], out=tmp_path / "out")
    path.write_text(json.dumps({"schema": "joynr-sim-check/2", "runs": [], "checks": []}))
    with pytest.raises(ReportError, match="schema: expected 'joynr-sim-check/1', got 'joynr-sim-check/2'"):
        write_report([run_dir], out=tmp_path / "out")


def test_malformed_trace_events_are_counted_and_left_out(tmp_path):
    b = RunBuilder()
    _looping_and_lost(b)
    run_dir = b.write(tmp_path / "runs", extra_lines={"cc-1": '{"v":1,"ts":"soon","seq":9,"rt":"cc-1","ev":"x"}\n'})
    run = read_run_input(run_dir)
    assert run.skipped_events == 1 and all(isinstance(e["ts"], int) for e in run.run.events)


def test_pages_carry_everything_inline_and_fetch_nothing(tmp_path):
    b = RunBuilder()
    _looping_and_lost(b)
    written = write_report([_run(tmp_path, b)], out=tmp_path / "out")
    for page in [written.index, *written.pages]:
        html = page.read_text()
        assert '<meta name="generator" content="joynr-sim report">' in html
        for pattern in ("<script src", "<link ", "@import", "url(http"):
            assert pattern not in html, (page.name, pattern)
        assert os.stat(page).st_mode & 0o077 == 0  # the run's traces are its owner's
    assert 'href="run-1.html"' in written.index.read_text()


def test_the_report_refuses_to_replace_what_it_did_not_write(tmp_path):
    b = RunBuilder()
    _looping_and_lost(b)
    run_dir = _run(tmp_path, b)
    out = tmp_path / "out"
    out.mkdir()
    (out / "run-1.html").write_text("<html>mine</html>")
    with pytest.raises(ReportError, match="run-1.html exists and was not written by joynr-sim report"):
        write_report([run_dir], out=out)
    assert (out / "run-1.html").read_text() == "<html>mine</html>" and not (out / "index.html").exists()
    (out / "run-1.html").unlink()
    (out / "index.html").symlink_to(tmp_path / "elsewhere.html")
    with pytest.raises(ReportError, match="index.html is a symbolic link"):
        write_report([run_dir], out=out)
    (out / "index.html").unlink()
    first = write_report([run_dir], out=out)
    (out / "notes.txt").write_text("keep")
    again = write_report([run_dir], out=out)  # its own pages are replaced, nothing else is touched
    assert first == again and (out / "notes.txt").read_text() == "keep"


def test_cli_report_prints_the_index_and_refuses_bad_input_in_one_line(tmp_path, capsys):
    b = RunBuilder()
    _looping_and_lost(b)
    _run(tmp_path, b)
    assert main(["report", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "runs" / "report" / "index.html") in out
    assert main(["report", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"joynr-sim report: {tmp_path / 'nothing'}: no such run directory or folder"
    assert main(["report", str(tmp_path / "runs"), "--check", str(tmp_path / "none.json")]) == 2
    assert "--check" in capsys.readouterr().err


def test_run_report_checks_where_its_pages_go_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "runs"
    (out / "report").mkdir(parents=True)
    (out / "report" / "index.html").write_text("mine")
    scenario = Path(__file__).resolve().parent.parent / "scenarios" / "provider-unregisters.yaml"
    assert main(["run", str(scenario), "--out", str(out), "--report"]) == 2
    err = capsys.readouterr().err
    assert "--report:" in err and "index.html exists and was not written by joynr-sim report" in err
    assert sorted(p.name for p in out.iterdir()) == ["report"]  # no run directory: nothing ran
    assert (out / "report" / "index.html").read_text() == "mine"
