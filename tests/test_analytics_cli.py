"""The checker as a command: inputs it skips or refuses, exit statuses, report and JUnit."""

from __future__ import annotations

import json
from xml.etree import ElementTree as ET

from analytics.app import main
from analytics_helpers import RunBuilder, entry, wire

PATH = [("lib-1", "ws"), ("cc-1", "mqtt"), ("cc-2", "ws"), ("lib-2", "ws")]


def clean_run(name: str = "run-1", b: RunBuilder | None = None) -> RunBuilder:
    b = b or RunBuilder(name)
    t = wire(b, "q1", PATH, 10, corr="c1")
    wire(b, "r1", list(reversed(PATH)), t, type_="rp", corr="c1")
    return b


def test_skipped_lines_are_counted_not_fatal(spark, tmp_path, capsys):
    b = clean_run()
    run_dir = b.write(tmp_path, extra_lines={
        "cc-1": '{"v":1,"ts":99,"seq":9,"run":"run-1","rt":"cc-1","kind":"cluster-controller",'
                '"ev":"msg.teleport"}\nnot json at all\n',
        "cc-2": '{"v":1,"ts":99,"seq":5,"run":"run-1","rt":"cc-2","ev":"msg.in","msg":"q',
    })
    out = tmp_path / "out"
    assert main([str(run_dir), "--out", str(out), "--check", "lost-message"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["input"]["skipped"] == {
        "torn_last_line": 1, "corrupt": 1, "unknown_event": {"msg.teleport": 1}}
    assert report["input"]["events"] == 14
    assert [c["name"] for c in report["checks"]] == ["lost-message"]
    text = capsys.readouterr()
    assert "1 torn last line" in text.out
    assert "Traceback" not in text.out + text.err


def test_newer_schema_version_is_refused(spark, tmp_path, capsys):
    b = clean_run()
    b.add("cc-1", "msg.in", 50, msg="q9", type="rq", hops=1, via="ws")["v"] = 2
    run_dir = b.write(tmp_path)
    assert main([str(run_dir), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "schema version 2" in err and "cc-1.ndjson" in err
    assert "at org.apache" not in err and "Traceback" not in err
    assert not (tmp_path / "out" / "report.json").exists()


def test_unusable_inputs_exit_2(spark, tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    assert "no such run directory" in capsys.readouterr().err
    (tmp_path / "empty" / "trace").mkdir(parents=True)
    assert main([str(tmp_path / "empty")]) == 2
    assert "no trace files" in capsys.readouterr().err
    assert main([str(tmp_path / "x*")]) == 2
    assert "matches nothing" in capsys.readouterr().err


def test_report_junit_and_slices(spark, tmp_path):
    bad = RunBuilder("bad")
    bad.put("cc-1", 1, "p", entry("WebSocketClient", "lib-1"), entry("Mqtt", "g1/cc-2"), "replaced")
    clean_run(b=bad)
    good = clean_run("good")
    good.policy = "broken-on-purpose"
    bad.write(tmp_path / "runs")
    good.write(tmp_path / "runs")
    junit = tmp_path / "ci" / "junit.xml"
    assert main([str(tmp_path / "runs" / "*"), "--junit", str(junit), "--quiet"]) == 1

    out = tmp_path / "runs" / "bad" / "check"  # default: in the first run directory
    report = json.loads((out / "report.json").read_text())
    assert report["exit_status"] == 1 and report["violations"] == 1
    checks = {c["name"]: c for c in report["checks"]}
    assert list(checks) == ["routing-loop", "overwrite-violation", "lost-message",
                            "gcd-consistency", "link-uniqueness", "takeover-storm", "multicast"]
    ow = checks["overwrite-violation"]
    assert ow["status"] == "fail" and ow["violations"] == 1 and ow["events_scanned"] == 1
    assert ow["description"] and ow["seeds"].startswith("000")
    detail = ow["details"][0]
    assert detail["key"] == "bad/cc-1/0" and detail["kind"] == "should-refuse:precedence"
    assert any("broken-on-purpose" in n and "precedence" in n for n in ow["notes"])
    sliced = (out / detail["slice"]).read_text().splitlines()
    assert [json.loads(line)["ev"] for line in sliced] == ["rt.put"]
    assert checks["link-uniqueness"]["notes"] == ["no link events: passes vacuously"]
    assert checks["lost-message"]["events_scanned"] == 28
    assert not list(out.glob(".*"))  # no temporary files left behind

    suite = ET.parse(junit).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert suite.get("tests") == "7" and suite.get("failures") == "1"
    failure = cases["overwrite-violation"].find("failure")
    assert failure is not None and "bad/cc-1/0" in failure.text
    assert cases["routing-loop"].find("failure") is None
