"""The library under every policy and every variant: each scenario holds under its own policy
and fails under each policy or variant it guards against. Runs go on the memory network, in virtual time, one after the
other (test_memory_library compares the library on the real brokers with it).

That this can fail is shown without brokers in test_scenario_matrix.py (a cell that holds
under a guarded policy is not ok). By hand: take the conflicting offers out of
``scenarios/routing-entry-expires.yaml`` (the two add_route steps) and ``joynr-sim run`` it
with ``--policy all``: it holds under last-writer-wins, the cell turns red and the exit
status is 1."""

from __future__ import annotations

from pathlib import Path

from joynr_sim.core.policies import POLICIES
from joynr_sim.core.variants import VARIANT_NAMES
from joynr_sim.scenario import load_scenario, load_scenarios
from joynr_sim.scenario.matrix import cell_of
from joynr_sim.scenario.run_inputs import run_folder
from joynr_sim.scenario.runner import run_scenario

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios"
# The seeds whose rules a scenario must be able to break, and how many of theirs may be smoke.
ROUTING_SEEDS = ("000_65e83c7f1cb84fd7.txt", "002_ed27daa13e583359.txt", "003_6b6ea9fcba272a2c.txt")
README = LIBRARY.parent / "docs" / "design" / "routing.md"
# The variants no library scenario can reach (docs/design/routing.md: the rules and the scenarios that guard
# them): their unit tests guard them; steal-refused is guarded by faults/duplicate-cc-id.
UNIT_TESTED_VARIANTS = {"links:uncapped-durability", "links:no-thief-queue", "links:steal-refused"}
SMOKE_SECTION = "### Smoke scenarios"


def test_every_scenario_guards_or_says_why_not():
    scenarios = load_scenarios(LIBRARY)
    for s in scenarios:
        assert bool(s.guards) != bool(s.smoke), f"{s.name}: give guards or smoke"
        assert s.checks, f"{s.name} checks nothing"
    routing = [s for s in scenarios if s.reproduces.seed in ROUTING_SEEDS]
    assert {s.reproduces.seed for s in routing} == set(ROUTING_SEEDS)
    smoke = [s.name for s in routing if s.smoke]
    assert len(routing) - len(smoke) >= 40


def test_a_scenario_is_smoke_only_where_the_readme_says_why():
    """No policy or variant can break a smoke scenario: docs/design/routing.md names each with the reason."""
    text = README.read_text()
    section = text[text.index(SMOKE_SECTION):]
    section = section[:section.index("\n#", len(SMOKE_SECTION))]
    listed = {line.split("`")[1] for line in section.splitlines() if line.startswith("| `")}
    assert listed == {s.name for s in load_scenarios(LIBRARY) if s.smoke}


async def test_library_holds_under_its_policy_and_fails_under_its_guards(tmp_path):
    """Every scenario under every policy, and under each variant it guards against: the cells
    that must end one way (`joynr-sim run --policy all` runs the other variants' too, where
    either ending is fine)."""
    scenarios = load_scenarios(LIBRARY)
    assert set().union(*(s.guards for s in scenarios)) >= set(VARIANT_NAMES) - UNIT_TESTED_VARIANTS
    runs = [(s, await run_scenario(s, tmp_path / run_folder(p), policy=p, network="memory"))
            for s in scenarios for p in (*POLICIES, *(g for g in s.guards if g not in POLICIES))]
    wrong = [c for c in (cell_of(s, r) for s, r in runs) if not c.ok]
    assert not wrong, "\n".join(
        f"{c.scenario} under {c.policy}: must {c.expected}, {c.outcome}: {c.text()}" for c in wrong)


async def test_a_scenario_without_its_conflict_holds_under_the_guarded_policy(tmp_path):
    """The guard is real: without its conflicting offers routing-entry-expires no longer
    fails under last-writer-wins, and the matrix says so."""
    text = (LIBRARY / "routing-entry-expires.yaml").read_text()
    start = text.index("  # conflicting offers")
    end = text.index("  - expect_route: {runtime: cc2, participant: \"@echo\", type: WebSocketClient}\n", start)
    path = tmp_path / "routing-entry-expires.yaml"
    path.write_text(text[:start] + text[end:])
    scenario = load_scenario(path)
    cell = cell_of(scenario, await run_scenario(scenario, tmp_path / "lww", policy="last-writer-wins",
                                                network="memory"))
    assert (cell.expected, cell.outcome, cell.ok) == ("fail", "held", False)


def test_the_readme_rule_table_names_scenarios_that_guard_what_it_says():
    """Each row of docs/design/routing.md's rule table names library scenarios (or a unit test) and the
    columns they fail under: those are in the scenarios' guards, which the matrix holds them to."""
    by_name = {s.name: s for s in (*load_scenarios(LIBRARY), *load_scenarios(LIBRARY / "faults"))}
    text = README.read_text()
    section = text[text.index("### The rules and the scenarios that guard them"):text.index(SMOKE_SECTION)]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| rule")
            and not line.startswith("|---")]
    assert len(rows) >= 30
    for row in rows:
        rule, _, scenarios, columns = (cell.strip() for cell in row.strip("|").split(" | "))
        named = [n.split("/")[-1] for n in scenarios.split("`")[1::2] if "*" not in n and not n.endswith(".py")]
        if "unit test" in scenarios:
            assert not named, row
            continue
        assert named and all(n in by_name for n in named), row
        guards = set().union(*(by_name[n].guards for n in named))
        assert set(columns.split(", ")) <= guards, f"{rule}: {set(columns.split(', ')) - guards}"
