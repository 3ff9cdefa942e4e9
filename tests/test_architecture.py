"""The architecture, checked: the import contracts of pyproject.toml hold on the real tree
and catch a forbidden import planted in a copy of it; no module grows past ~400 lines
without saying why at its top."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("joynr_sim", "analytics", "brokers", "trace_schema")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

CONTRACTS = {
    "core-is-pure": "joynr_sim.core is pure rules: no transport, runtime, store, trace, scenario or I/O",
    "analytics-is-independent": "analytics is an independent oracle: it never imports joynr_sim",
    "transport-below-runtime": "joynr_sim.transport never imports joynr_sim.runtime",
}
# Contracts the tree does not keep yet, with the one import that breaks each. When that
# import is gone, delete the entry: the real tree is then checked against every contract.
PENDING: dict[str, str] = {}


def lint_imports(root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    args = [str(LINT_IMPORTS), "--no-cache", "--no-logo", "--config", str(root / "pyproject.toml")]
    for contract in contracts:
        args += ["--contract", contract]
    return subprocess.run(args, cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)


def first_hops(output: str) -> set[str]:
    """The first import of every chain lint-imports reports as breaking a contract."""
    return {m.group(1) for m in re.finditer(r"^-\s+(\S+ -> \S+)", output, re.M)}


def test_the_contracts_are_the_ones_the_readme_lists():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for contract_id, name in CONTRACTS.items():
        assert f'id = "{contract_id}"' in config and f'name = "{name}"' in config
        assert f"`{contract_id}`" in readme, contract_id


def test_the_real_tree_keeps_the_contracts():
    kept = [c for c in CONTRACTS if c not in PENDING]
    result = lint_imports(ROOT, *kept)
    assert result.returncode == 0, result.stdout + result.stderr
    for contract_id, known in PENDING.items():
        result = lint_imports(ROOT, contract_id)
        if result.returncode == 0:
            pytest.fail(f"{contract_id} is kept now: delete it from PENDING")
        # Broken by the known import and by nothing else.
        assert first_hops(result.stdout) == {known}, result.stdout


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages and the project's configuration, to break on purpose."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize(
    "contract_id, module, forbidden, reported",
    [
        ("core-is-pure", "joynr_sim/core/address.py", "asyncio", "asyncio"),
        ("core-is-pure", "joynr_sim/core/routing.py", "joynr_sim.trace", "joynr_sim.trace"),
        # An external package is reported by its top-level name.
        ("core-is-pure", "joynr_sim/core/message.py", "paho.mqtt.client", "paho"),
        ("analytics-is-independent", "analytics/report.py", "joynr_sim.core.address",
         "joynr_sim.core.address"),
        ("transport-below-runtime", "joynr_sim/transport/mqtt.py", "joynr_sim.runtime.base",
         "joynr_sim.runtime.base"),
    ],
)
def test_a_forbidden_import_breaks_its_contract(tree, contract_id, module, forbidden, reported):
    importer = module.removesuffix(".py").replace("/", ".")
    path = tree / module
    assert lint_imports(tree, contract_id).returncode == (1 if contract_id in PENDING else 0)
    path.write_text(path.read_text(encoding="utf-8") + f"\nimport {forbidden}  # noqa\n",
                    encoding="utf-8")
    result = lint_imports(tree, contract_id)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{CONTRACTS[contract_id]} BROKEN" in " ".join(result.stdout.split())
    assert f"{importer} -> {reported}" in first_hops(result.stdout)


# -- module size ------------------------------------------------------------------------

MAX_LINES = 400
REASON = "Longer than 400 lines because"
SIZED = ("joynr_sim", "brokers", "analytics")
# Modules already past the limit, without a stated reason, in files others are changing.
# Each must be split or state its reason at its top; then delete its entry.
OVER_LIMIT_PENDING: set[str] = set()


def over_limit_without_reason(root: Path) -> set[str]:
    found = set()
    for package in SIZED:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if text.count("\n") <= MAX_LINES:
                continue
            doc = ast.get_docstring(ast.parse(text)) or ""
            if REASON not in " ".join(doc.split()):
                found.add(path.relative_to(root).as_posix())
    return found


def test_no_module_is_over_400_lines_without_a_reason_at_its_top():
    found = over_limit_without_reason(ROOT)
    assert found - OVER_LIMIT_PENDING == set(), f"split them or start their docstring with {REASON!r}"
    assert OVER_LIMIT_PENDING - found == set(), "within the limit or explained now: delete from the list"


def test_the_module_size_rule_sees_a_long_module_and_its_reason(tmp_path):
    (tmp_path / "analytics").mkdir()
    long = tmp_path / "analytics" / "long.py"
    body = "x = 1\n" * (MAX_LINES + 1)
    long.write_text('"""A module."""\n' + body)
    assert over_limit_without_reason(tmp_path) == {"analytics/long.py"}
    long.write_text(f'"""A module.\n\n{REASON} it must.\n"""\n' + body)
    assert over_limit_without_reason(tmp_path) == set()


# -- routing-table changes ----------------------------------------------------------------

# A put or remove on a routing table: every one outside core/ goes through a router's
# add_next_hop or remove_next_hop, which send what waited for the route in the same call.
TABLE_CHANGE = re.compile(r"\btable\.(put|remove)\(")
# The runner's view of a routing table in a host process: its put and remove are the
# runtime's add_next_hop and remove_next_hop there (ops table_put and table_remove).
REMOTE_VIEW = {"joynr_sim/host/handles.py"}


def table_changes_outside_core(root: Path) -> set[str]:
    found = set()
    for path in sorted((root / "joynr_sim").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("joynr_sim/core/") or rel in REMOTE_VIEW:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if TABLE_CHANGE.search(line):
                found.add(f"{rel}:{n}")
    return found


def test_only_core_changes_a_routing_table():
    assert table_changes_outside_core(ROOT) == set()


def test_the_table_change_rule_sees_a_put_outside_core(tmp_path):
    (tmp_path / "joynr_sim" / "runtime").mkdir(parents=True)
    (tmp_path / "joynr_sim" / "core").mkdir()
    (tmp_path / "joynr_sim" / "core" / "router.py").write_text("self.table.put(p, e, o)\n")
    (tmp_path / "joynr_sim" / "runtime" / "x.py").write_text("ok = 1\nself.table.remove(p)\n")
    assert table_changes_outside_core(tmp_path) == {"joynr_sim/runtime/x.py:2"}


# -- test tiers -------------------------------------------------------------------------

UNMARKED = '''
import pytest

from brokers import BrokerSet


async def test_unmarked(tmp_path):
    async with BrokerSet(["g"], broker="mosquitto", run_dir=tmp_path):
        pass


@pytest.mark.e2e
async def test_marked(tmp_path):
    async with BrokerSet(["g"], broker="mosquitto", run_dir=tmp_path):
        pass


def test_starts_nothing():
    assert BrokerSet(["g"], broker="g=mqtt://127.0.0.1:1", run_dir=".")
'''


def test_a_test_that_starts_a_broker_without_the_e2e_mark_fails(tmp_path):
    # Mosquitto starts in milliseconds: the guard sees a real broker start.
    for name in ("conftest.py", "broker_helpers.py", "gcd_helpers.py"):
        shutil.copy(ROOT / "tests" / name, tmp_path / name)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "test_tiers.py").write_text(UNMARKED, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rE", "test_tiers.py"],
        cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/sbin:/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=300,
    )
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "3 passed, 1 error" in out, out
    assert "ERROR at teardown of test_unmarked" in out, out
    assert "started a broker but is not marked e2e" in out, out
