"""``joynr-sim run --policy all``: the matrix printed, OUT/<policy>/<scenario>/, matrix.json and
JUnit; exit 0 only when every scenario held under its own policy and failed under each it
guards against, 1 otherwise, 2 for unusable options before anything runs."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from joynr_sim.cli import main
from joynr_sim.core.variants import RULE_SET_NAMES
from joynr_sim.scenario.run_inputs import run_folder

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


def test_policy_all_writes_the_matrix_and_exits_0(tmp_path, capsys):
    """Every policy and every variant is a column, each run in its own folder (on the memory
    network: the matrix is the same code on every network, test_memory_library compares them)."""
    folder = library_copy(tmp_path, "routing-entry-expires")
    out, junit = tmp_path / "runs", tmp_path / "junit.xml"
    status = main(["run", str(folder), "--policy", "all", "--out", str(out), "--junit", str(junit),
                   "--network", "memory"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "policy matrix" in printed and "precedence: held" in printed
    doc = json.loads((out / "matrix.json").read_text())
    cells = doc["scenarios"][0]["cells"]
    assert doc["ok"] and tuple(cells) == RULE_SET_NAMES
    assert cells["precedence"]["outcome"] == "held" and cells["last-writer-wins"]["outcome"] == "failed"
    assert cells["routing:merge-takes-newer"]["expected"] == "fail"
    assert cells["routing:merge-takes-newer"]["outcome"] == "failed"
    assert cells["last-writer-wins"]["detail"].startswith("step ")
    for column in cells:
        assert (out / run_folder(column) / "routing-entry-expires" / "run.json").is_file()
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == (str(len(RULE_SET_NAMES)), "0", "0")


GUARDS = "guards: [gcd-trust, last-writer-wins, routing:merge-takes-newer]"


@pytest.mark.parametrize("column", ["local-remote", "gcd:ignores-gbids"])
def test_a_guard_that_holds_exits_1(tmp_path, capsys, column):
    # routing-entry-expires holds under local-remote and every GCD variant; claiming it
    # guards against one is wrong
    folder = library_copy(tmp_path, "routing-entry-expires", guards={GUARDS: GUARDS[:-1] + f", {column}]"})
    assert column in (folder / "routing-entry-expires.yaml").read_text()
    out, junit = tmp_path / "runs", tmp_path / "junit.xml"
    assert main(["run", str(folder), "--policy", "all", "--out", str(out), "--junit", str(junit),
                 "--network", "memory"]) == 1
    doc = json.loads((out / "matrix.json").read_text())
    bad = doc["scenarios"][0]["cells"][column]
    assert (doc["ok"], bad["expected"], bad["outcome"], bad["ok"]) == (False, "fail", "held", False)
    failure = ElementTree.parse(junit).getroot().find(f".//testcase[@name='{column}']/failure")
    assert f"must fail under {column}" in failure.get("message")


@pytest.mark.parametrize("extra, words", [
    (["--policy", "all", "--jobs", "0"], "--jobs must be 1 to 16"),
    (["--policy", "everything"], "choose a policy (precedence, local-remote, gcd-trust, last-writer-wins), a variant"),
    (["--gcd-last-seen-timeout", "0"], "--gcd-last-seen-timeout: expected 1 to 31536000000 ms, got 0"),
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
