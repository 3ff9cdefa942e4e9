"""The CLI's tables at 80 columns (COLUMNS=80): one line per scenario in ``list``, the
participant view of ``trace`` with ``@name``, the policy matrices; full values in --json;
every broken scenario file named by ``run`` and ``list``, then exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from joynr_sim.cli import main

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "cc-refuses-route-to-own-topic.yaml"  # names a provider and a proxy (@px)


@pytest.fixture(autouse=True)
def _eighty_columns(monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    assert main(["run", str(SCENARIO), "--network", "memory", "--seed", "3", "--out", str(out)]) == 0
    return out / "cc-refuses-route-to-own-topic"


def test_list_is_one_line_per_scenario_at_80_columns(capsys) -> None:
    assert main(["list", "--json", str(ROOT / "scenarios")]) == 0
    names = [row["name"] for row in json.loads(capsys.readouterr().out)]
    assert main(["list", str(ROOT / "scenarios")]) == 0
    out = capsys.readouterr().out
    assert _widest(out) <= 80
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == len(names)  # no name or sentence wraps onto a second line
    cells = [row.split("│")[1].strip() for row in rows]
    # a name is whole, or its beginning and "…": the same cut for every name of that length
    assert all(c == n or (c.endswith("…") and n.startswith(c[:-1])) for c, n in zip(cells, names))
    assert "cc-refuses-route-to-own-topic" in cells


def test_list_json_has_the_full_values(capsys) -> None:
    assert main(["list", "--json", str(SCENARIO)]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["name"] == "cc-refuses-route-to-own-topic" and row["policy"] == "precedence"
    assert row["reproduces"].startswith("If no Routing Entry for a participantId exists")
    assert row["seed"] == "000_65e83c7f1cb84fd7.txt" and row["steps"] == 13


@pytest.fixture
def broken_folder(tmp_path) -> Path:
    shutil.copy(SCENARIO, tmp_path / "good.yaml")
    (tmp_path / "a-missing-runtimes.yaml").write_text("name: a\n")
    (tmp_path / "b-not-yaml.yaml").write_text("steps: [\n")
    return tmp_path


def test_list_names_every_broken_file_and_exits_2(broken_folder, capsys) -> None:
    assert main(["list", str(broken_folder)]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines() if "\n" not in captured.err.strip() else [" ".join(
        captured.err.split())]
    assert "2 broken scenario files" in line and "a-missing-runtimes.yaml" in line and "b-not-yaml.yaml" in line
    assert "cc-refuses-route-to-own-topic" in captured.out  # the good one is still listed


def test_run_names_every_broken_file_and_exits_2(broken_folder, tmp_path, capsys) -> None:
    out = tmp_path / "runs"
    assert main(["run", str(broken_folder), "--network", "memory", "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "2 broken scenario files" in err
    assert "a-missing-runtimes.yaml:1" in err and "b-not-yaml.yaml:" in err
    assert not out.exists()  # nothing ran


def test_trace_participant_takes_a_scenario_name(run_dir, capsys) -> None:
    assert main(["trace", str(run_dir), "--participant", "@px", "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["names"] == ["@px"] and view["participant"] != "@px"
    assert view["routing"] and all(e["participant"] == view["participant"] for e in view["routing"])
    assert {m["type"] for m in view["messages"]} == {"rq", "rp"}
    assert main(["trace", str(run_dir), "--participant", "@counter", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["participant"] == "own-topic-counter"


def test_trace_participant_fits_80_columns_and_names_participants(run_dir, capsys) -> None:
    assert main(["trace", str(run_dir), "--participant", "@px"]) == 0
    out = capsys.readouterr().out
    assert _widest(out) <= 80
    assert "@px" in out and "@counter" in out  # generated ids read as the scenario's names
    assert "rt.put" in out and "…" not in out.split("messages from or to")[0]  # entries wrap, never cut


def test_an_unknown_scenario_name_is_one_line_and_exit_2(run_dir, capsys) -> None:
    assert main(["trace", str(run_dir), "--participant", "@nobody"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no provider or proxy named 'nobody'" in err and "@counter, @px" in err


def test_trace_summary_json_lists_the_names(run_dir, capsys) -> None:
    assert main(["trace", str(run_dir), "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert set(view["participants"]) == {"@counter", "@px"}
    assert {r["runtime"] for r in view["runtimes"]} >= {"cc1", "app1", "consumer"}


def test_policies_fit_80_columns_and_have_json(capsys) -> None:
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    assert _widest(out) <= 80 and "…" not in out
    assert main(["policies", "--policy", "precedence", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["policies"]["precedence"]["matrix"]["cluster-controller"]["Mqtt"]["WebSocket"] == "refused"


def test_load_scenarios_collects_every_broken_file(broken_folder) -> None:
    from joynr_sim.scenario.loader import BrokenScenarios, ScenarioError, load_scenarios

    with pytest.raises(ScenarioError) as info:
        load_scenarios(broken_folder)
    assert isinstance(info.value, BrokenScenarios)
    assert [e.path.name for e in info.value.errors] == ["a-missing-runtimes.yaml", "b-not-yaml.yaml"]
    assert "\n" not in str(info.value)  # one line, as every error of the CLI


def test_the_broker_properties_table_fits_80_columns() -> None:
    from rich.console import Console

    from brokers.promises import PROPERTIES, Outcome
    from joynr_sim.brokers_console import Checked, _table

    checked = [Checked(name, name, "mqtt://127.0.0.1:1883", {p.id: Outcome(False, "no message within 5 s")
                                                              for p in PROPERTIES}, {}, 12.5)
               for name in ("amqtt", "mosquitto", "memory")]
    console = Console(width=80, record=True, color_system=None)
    console.print(_table(checked))
    text = console.export_text()
    assert _widest(text) <= 80 and "…" not in text
    assert all(p.id in text for p in PROPERTIES)
