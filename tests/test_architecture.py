"""The architecture, checked: the import contracts of pyproject.toml hold on the real tree
and catch a forbidden import planted in a copy of it; no module grows past 400 lines;
``Runtime`` stays lifecycle and carrying out, composed and never specialised by hooks."""

from __future__ import annotations

import inspect
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
    "node-is-core": "joynr_sim.core.node imports only joynr_sim.core",
    "runtime-through-node-and-ports": "the runtime imports its node and ports, not routers or transports",
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
    readme = (ROOT / "docs" / "design" / "architecture.md").read_text(encoding="utf-8")
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
        ("node-is-core", "joynr_sim/core/node.py", "joynr_sim.clock", "joynr_sim.clock"),
        ("runtime-through-node-and-ports", "joynr_sim/runtime/base.py", "joynr_sim.core.router",
         "joynr_sim.core.router"),
        ("runtime-through-node-and-ports", "joynr_sim/runtime/joynr_runtime.py", "joynr_sim.transport.mqtt",
         "joynr_sim.transport.mqtt"),
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
SIZED = ("joynr_sim", "brokers", "analytics", "trace_schema")


def over_limit(root: Path) -> set[str]:
    found = set()
    for package in SIZED:
        for path in sorted((root / package).rglob("*.py")):
            if path.read_text(encoding="utf-8").count("\n") > MAX_LINES:
                found.add(path.relative_to(root).as_posix())
    return found


def test_no_module_is_over_400_lines():
    assert over_limit(ROOT) == set(), "split them by responsibility"


def test_the_module_size_rule_sees_a_long_module(tmp_path):
    (tmp_path / "analytics").mkdir()
    long = tmp_path / "analytics" / "long.py"
    long.write_text('"""A module."""\n' + "x = 1\n" * (MAX_LINES - 1))
    assert over_limit(tmp_path) == set()
    long.write_text('"""A module."""\n' + "x = 1\n" * MAX_LINES)
    assert over_limit(tmp_path) == {"analytics/long.py"}


# -- the runtime ---------------------------------------------------------------------------

MAX_RUNTIME_METHODS = 25


def methods(cls: type) -> set[str]:
    """What a class defines itself: functions and properties."""
    return {name for name, value in vars(cls).items()
            if inspect.isfunction(value) or isinstance(value, (property, staticmethod, classmethod))}


def overridden_hooks(base: type, classes: list[type]) -> set[str]:
    """Methods of ``base`` a class below it defines again: a template hook (a constructor
    composes, it is no hook)."""
    own = methods(base) - {"__init__"}
    return {f"{cls.__name__}.{name}" for cls in classes for name in methods(cls) & own}


def runtime_classes():
    from joynr_sim.runtime.base import Runtime
    from joynr_sim.runtime.cluster_controller import ClusterController
    from joynr_sim.runtime.gcd_service import GcdService
    from joynr_sim.runtime.joynr_runtime import JoynrRuntime
    from joynr_sim.runtime.libjoynr import LibjoynrRuntime
    return Runtime, [JoynrRuntime, ClusterController, LibjoynrRuntime, GcdService]


def test_runtime_is_lifecycle_and_carrying_out_and_no_kind_overrides_it():
    runtime, kinds = runtime_classes()
    assert len(methods(runtime)) <= MAX_RUNTIME_METHODS, sorted(methods(runtime))
    assert overridden_hooks(runtime, kinds) == set()
    for cls in kinds:  # nor a method of a class between it and Runtime
        between = [c for c in cls.__mro__[1:] if issubclass(c, runtime) and c is not runtime]
        for upper in between:
            assert overridden_hooks(upper, [cls]) == set()


def test_the_hook_rule_sees_an_override():
    class Base:
        def start(self): ...

        def carry_out(self): ...

    class Kind(Base):
        def start(self): ...

        def cut(self): ...

    assert overridden_hooks(Base, [Kind]) == {"Kind.start"}


# -- routing-table changes ----------------------------------------------------------------

# A put or remove on a routing table: every one outside core/ goes through a router's
# add_next_hop or remove_next_hop, which send what waited for the route in the same call.
TABLE_CHANGE = re.compile(r"\btable\.(put|remove)\(")


def table_changes_outside_core(root: Path) -> set[str]:
    found = set()
    for path in sorted((root / "joynr_sim").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("joynr_sim/core/"):
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
