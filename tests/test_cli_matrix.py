"""``joynr-sim run --policy all``: the matrix printed, OUT/<policy>/<scenario>/, matrix.json and
JUnit; exit 0 only when every scenario held under its own policy and failed under each it
guards against, 1 otherwise, 2 for unusable options before anything runs."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from joynr_sim.cli import main

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios"


def library_copy(tmp_path: Path, *names: str, guards: dict[str, str] | None = None) -> Path:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    for name in names:
        text = (LIBRARY / f"{name}.yaml").read_text()
        for old, new in (guards or {}).items():
            text = text.replace(old, new)
        (folder / f"{name}.yaml").write_text(text)
    return folder


@pytest.mark.e2e
def test_policy_all_writes_the_matrix_and_exits_0(tmp_path, capsys):
    folder = library_copy(tmp_path, "routing-entry-expires")
    out, junit = tmp_path / "runs", tmp_path / "junit.xml"
    status = main(["run", str(folder), "--policy", "all", "--out", str(out), "--junit", str(junit), "--jobs", "4"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "policy matrix" in printed and "held" in printed
    doc = json.loads((out / "matrix.json").read_text())
    cells = doc["scenarios"][0]["cells"]
    assert doc["ok"] and set(cells) == {"precedence", "local-remote", "gcd-trust", "last-writer-wins"}
    assert cells["precedence"]["outcome"] == "held" and cells["last-writer-wins"]["outcome"] == "failed"
    assert cells["last-writer-wins"]["detail"].startswith("step ")
    for policy in cells:
        assert (out / policy / "routing-entry-expires" / "run.json").is_file()
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "0", "0")


@pytest.mark.e2e
def test_a_guard_that_holds_exits_1(tmp_path, capsys):
    # routing-entry-expires holds under gcd-trust; claiming it guards against it is wrong
    folder = library_copy(tmp_path, "routing-entry-expires", guards={
        "guards: [local-remote, last-writer-wins]": "guards: [local-remote, gcd-trust, last-writer-wins]"})
    out, junit = tmp_path / "runs", tmp_path / "junit.xml"
    assert main(["run", str(folder), "--policy", "all", "--out", str(out), "--junit", str(junit), "--jobs", "4"]) == 1
    doc = json.loads((out / "matrix.json").read_text())
    bad = doc["scenarios"][0]["cells"]["gcd-trust"]
    assert (doc["ok"], bad["expected"], bad["outcome"], bad["ok"]) == (False, "fail", "held", False)
    failure = ElementTree.parse(junit).getroot().find(".//testcase[@name='gcd-trust']/failure")
    assert "must fail under gcd-trust" in failure.get("message")


@pytest.mark.parametrize("extra, words", [
    (["--policy", "all", "--jobs", "0"], "--jobs must be 1 to 16"),
    (["--policy", "all", "--report"], "--report goes with one policy"),
    (["--policy", "everything"], "choose one of precedence, local-remote, gcd-trust, last-writer-wins or all"),
])
def test_unusable_matrix_options_exit_2(tmp_path, capsys, extra, words):
    folder = library_copy(tmp_path, "routing-entry-expires")
    assert main(["run", str(folder), "--out", str(tmp_path / "runs"), *extra]) == 2
    assert words in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_foreign_matrix_json_or_junit_folder_is_refused(tmp_path, capsys):
    folder = library_copy(tmp_path, "routing-entry-expires")
    out = tmp_path / "runs"
    out.mkdir()
    (out / "matrix.json").write_text("{}")
    assert main(["run", str(folder), "--out", str(out), "--policy", "all"]) == 2
    assert "not written by joynr-sim" in capsys.readouterr().err
    assert (out / "matrix.json").read_text() == "{}"
    assert main(["run", str(folder), "--out", str(tmp_path / "o"), "--junit", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
