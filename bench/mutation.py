"""``make mutate``: the mutation score of the pure rules in joynr_sim/core.

mutmut (configured in pyproject.toml, ``[tool.mutmut]``) copies the tree into ``mutants/``,
traces which unit test of the fast tier calls which function, then runs each mutant against
only the tests that reach it. This driver picks the mutants of the chosen core modules,
runs mutmut on them, reads the verdicts mutmut keeps beside each mutated file
(``mutants/<path>.meta``), prints a table per module and writes ``bench/results/mutation.json``.

Excluded mutants are those an entry of ``[tool.mutmut.excluded]`` covers: mutants that change
only a message, a reason's free-text detail or a log line, and named equivalent mutants.
They are left out of the score whatever their verdict. The score is over the mutants
checked; a module with unchecked ones (``--sample``) does not meet the target.

    python -m bench.mutation                   # every module, every mutant
    python -m bench.mutation router lcd        # some modules
    python -m bench.mutation --pending         # only the mutants an earlier run left alive
    python -m bench.mutation --sample 300 links  # a seeded sample of those, for a slow module
    python -m bench.mutation --report          # no run: the table of the last verdicts
    python -m bench.mutation --survivors lcd   # the diff of each surviving mutant
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "mutation.json"
TARGET = 0.95

# module name -> its source files (links is a package: every file in it).
MODULES = {
    "policies": ["joynr_sim/core/policies.py"],
    "router": ["joynr_sim/core/router.py"],
    "gcd": ["joynr_sim/core/gcd.py"],
    "lcd": ["joynr_sim/core/lcd.py"],
    "discovery": ["joynr_sim/core/discovery.py"],
    "multicast": ["joynr_sim/core/multicast.py"],
    "subscriptions": ["joynr_sim/core/subscriptions.py"],
    "links": sorted(str(p.relative_to(ROOT)) for p in (ROOT / "joynr_sim/core/links").glob("*.py")),
}
# Modules other work edits most: run last, so their verdicts are of the newest source.
ORDER = ["router", "lcd", "discovery", "multicast", "subscriptions", "policies", "gcd", "links"]

# Extra pytest options for a first pass over a module's mutants (PYTEST_ADDOPTS, which
# mutmut's in-process pytest reads; the configuration's test selection stays one for all
# modules). The links' ownership state machine (150 Hypothesis examples of 40 steps with
# threads, ~5 s a run, the whole cost of most links mutants) is left out of the first pass;
# a second pass runs the mutants that survived it against the whole selection, so every
# verdict is of the whole selection (a mutant the first pass kills is killed by the whole).
MODULE_PYTEST_ADDOPTS = {
    "links": "--deselect tests/test_links.py::TestOwnership",
}

KILLED = {1, 3}  # a test failed (3: pytest's internal error, mutmut counts it a kill)
TIMEOUT = {36, 24, -24, 152, 255}  # the mutant made the tests hang: mutmut counts it caught
SURVIVED = {0}
NO_TESTS = {33, 5}  # no test of the selection reaches the function: it survives


def _mutmut_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]


def _glob(module: str) -> str:
    return f"joynr_sim.core.{module}.*"


def _pending(module: str) -> list[str]:
    """The mutants of ``module`` no test has caught yet (survived, unchecked, no tests)."""
    os.chdir(ROOT)
    rules = _mutmut_config().get("excluded", {})
    return sorted(name for source in MODULES[module] for name, code in _verdicts_of(source).items()
                  if code not in KILLED and code not in TIMEOUT and not exclusion_of(name, source, rules))


def sync_unmutated() -> int:
    """Copy into ``mutants/`` the source files mutmut does not mutate and that changed since
    it copied them: mutmut copies such a file only once, so a later edit of a module the
    mutated ones import would otherwise not be seen by the tests."""
    os.chdir(ROOT)
    from mutmut.configuration import config

    copied = 0
    for top in config().source_paths:
        for path in Path(top).rglob("*"):
            if not path.is_file() or "__pycache__" in path.parts or config().should_mutate(path):
                continue
            target = ROOT / "mutants" / path
            if not target.exists() or target.read_bytes() != path.read_bytes():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
                copied += 1
    return copied


def _names(module: str, pending: bool, sample: int | None) -> list[str]:
    """The mutants of ``module`` to run: all of them (a glob), or (``pending``) those no test
    caught in an earlier run, since a test added since cannot revive a killed one;
    ``sample``: at most that many of those, drawn at random (seeded), for a module too slow
    to run whole."""
    if not pending and sample is None:
        return [_glob(module)]
    names = _pending(module)
    if sample is not None and len(names) > sample:
        names = sorted(random.Random(f"{module}:{len(names)}").sample(names, sample))
    return names


def run_modules(modules: list[str], max_children: int, pending: bool = False, sample: int | None = None) -> int:
    """``mutmut run`` over the chosen mutants of ``modules``: one run for the modules that
    share their pytest options (mutmut's start, a clean run of the tests and a forced
    failure, costs a minute each time), then, for a module whose first pass narrowed the
    tests, its survivors against the whole selection."""
    failed = 0
    passes = [(addopts, [m for m in modules if MODULE_PYTEST_ADDOPTS.get(m, "") == addopts], pending)
              for addopts in dict.fromkeys(MODULE_PYTEST_ADDOPTS.get(m, "") for m in modules)]
    # The second pass: what a first pass with narrower options left alive, against all tests.
    passes += [("", [m], True) for m in modules if MODULE_PYTEST_ADDOPTS.get(m)]
    for addopts, group, only_pending in passes:
        names = [n for m in group for n in _names(m, only_pending, sample)]
        if not names:
            print(f"{', '.join(group)}: no mutant pending")
            continue
        env = dict(os.environ)
        if addopts:
            env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', '')} {addopts}".strip()
        cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children), *names]
        print(f"$ PYTEST_ADDOPTS={env.get('PYTEST_ADDOPTS', '')!r} mutmut run --max-children {max_children} "
              f"<{len(names)} mutant names or globs of {', '.join(group)}>", flush=True)
        done = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            print(done.stdout[-4000:])
            failed += 1
    return failed


def _verdicts_of(source: str) -> dict[str, int | None]:
    meta = ROOT / "mutants" / f"{source}.meta"
    return json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}


def _diff(name: str, source: str) -> str:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    return "\n".join(get_diff_for_mutant(name, path=source).splitlines()[2:])


def _changed_lines(diff: str) -> list[tuple[str, str]] | None:
    """The (old, new) line pairs a mutant changes; None when they do not pair up."""
    lines = diff.splitlines()
    old = [line[1:] for line in lines if line.startswith("-")]
    new = [line[1:] for line in lines if line.startswith("+")]
    return list(zip(old, new)) if len(old) == len(new) else None


def exclusion_of(name: str, source: str, rules: dict[str, dict]) -> str | None:
    """The name of the ``[tool.mutmut.excluded]`` entry that covers the mutant, if any."""
    diff = _diff(name, source)
    pairs = _changed_lines(diff)

    def covers(rule: dict, old: str, new: str) -> bool:
        if not re.search(rule["line"], old):
            return False
        if rule.get("ast") == "raise-message":
            return _raise_without_message(old) == _raise_without_message(new) is not None
        for pattern in rule["strip"]:
            old, new = _cut(pattern, old), _cut(pattern, new)
        return _squeeze(old) == _squeeze(new)

    for rule_name, rule in rules.items():
        if "file" in rule and rule["file"] != source:
            continue
        if "diff" in rule:  # an equivalent mutant, named by the change it makes
            if re.search(rule["diff"], diff):
                return rule_name
        elif pairs and all(covers(rule, old, new) for old, new in pairs):
            return rule_name
    return None


def _raise_without_message(line: str) -> str | None:
    """A one-line ``raise E(...)`` without its message, the last argument: of
    ``E(field, message)`` the field (which the error carries) stays."""
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Raise):
        return None
    call = tree.body[0].exc
    if not isinstance(call, ast.Call):
        return None
    call.args = call.args[:-1]  # the message is the last argument; what comes before stays
    return ast.dump(tree)


def _cut(pattern: str, line: str) -> str:
    """``line`` without what ``pattern`` matches; of a pattern with a group named ``cut``,
    without that group only (the rest of the match is context)."""
    def cut(m: re.Match) -> str:
        if "cut" not in m.re.groupindex or m.start("cut") < 0:
            return ""
        return m.group(0)[:m.start("cut") - m.start()] + m.group(0)[m.end("cut") - m.start():]

    return re.sub(pattern, cut, line)


def _squeeze(line: str) -> str:
    # A removed last argument leaves "x, )": the same call as "x)".
    return re.sub(r",\)", ")", re.sub(r"\s+", "", line))


def summarise(module: str) -> dict:
    os.chdir(ROOT)
    rules = _mutmut_config().get("excluded", {})
    counts = {"killed": 0, "timeout": 0, "survived": 0, "no_tests": 0, "not_checked": 0}
    excluded: dict[str, int] = {}
    mutants = 0
    for source in MODULES[module]:
        for name, code in _verdicts_of(source).items():
            mutants += 1
            rule = exclusion_of(name, source, rules)
            if rule:
                excluded[rule] = excluded.get(rule, 0) + 1
            elif code in KILLED:
                counts["killed"] += 1
            elif code in TIMEOUT:
                counts["timeout"] += 1
            elif code in NO_TESTS:
                counts["no_tests"] += 1
            elif code is None:
                counts["not_checked"] += 1
            else:
                counts["survived"] += 1
    # The score is over the mutants checked: all of them once a module ran whole.
    scored = mutants - sum(excluded.values()) - counts["not_checked"]
    caught = counts["killed"] + counts["timeout"]
    return {
        "files": MODULES[module],
        "measured": _measured(module),
        "first_pass_pytest_addopts": MODULE_PYTEST_ADDOPTS.get(module, ""),
        "test_files": _covering_test_files(module),
        "mutants": mutants,
        "killed": caught,
        "of_which_timeout": counts["timeout"],
        "survived": counts["survived"] + counts["no_tests"],
        "of_which_no_tests": counts["no_tests"],
        "not_checked": counts["not_checked"],
        "excluded": sum(excluded.values()),
        "excluded_by_entry": excluded,
        "score": round(caught / scored, 4) if scored else None,
    }


def _measured(module: str) -> str | None:
    """When mutmut last wrote a verdict of ``module``."""
    metas = [ROOT / "mutants" / f"{source}.meta" for source in MODULES[module]]
    times = [m.stat().st_mtime for m in metas if m.exists()]
    return datetime.fromtimestamp(max(times), UTC).isoformat(timespec="seconds") if times else None


def _covering_test_files(module: str) -> list[str]:
    """The test files with a test that calls a function of ``module`` (mutmut's trace): the
    tests its mutants run against."""
    stats = ROOT / "mutants" / "mutmut-stats.json"
    if not stats.exists():
        return []
    prefix = f"joynr_sim.core.{module}."
    tests = json.loads(stats.read_text())["tests_by_mangled_function_name"]
    return sorted({t.split("::")[0] for name, ts in tests.items() if name.startswith(prefix) for t in ts})


def survivors(module: str) -> None:
    """The diff of each mutant of ``module`` that no test caught and no exclusion covers."""
    os.chdir(ROOT)
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    rules = _mutmut_config().get("excluded", {})
    for source in MODULES[module]:
        for name, code in sorted(_verdicts_of(source).items()):
            if code in KILLED or code in TIMEOUT or exclusion_of(name, source, rules):
                continue
            print(f"# {name} (exit {code})")
            print(get_diff_for_mutant(name, path=source))
            print()


def write_results(rows: dict[str, dict]) -> None:
    cfg = _mutmut_config()
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    modules = previous.get("modules", {})
    for module, row in rows.items():
        modules[module] = row
    report = {
        "tool": "mutmut",
        "version": version("mutmut"),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "target": TARGET,
        "test_command": shlex.join(["pytest", *cfg.get("pytest_add_cli_args", []),
                                    *cfg.get("pytest_add_cli_args_test_selection", [])]),
        "test_selection_note": "mutmut runs each mutant against only the tests of this selection that call "
                               "its function (traced in a stats run)",
        "exclusions": cfg.get("excluded", {}),
        "modules": dict(sorted(modules.items(), key=lambda kv: ORDER.index(kv[0]))),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")


def print_table(rows: dict[str, dict]) -> bool:
    table = Table(title="mutation score of joynr_sim/core (mutmut, fast-tier unit tests)")
    for column in ("module", "mutants", "killed", "survived", "excluded", "unchecked", "score", "≥95%"):
        table.add_column(column, justify="left" if column == "module" else "right", no_wrap=True)
    every_met = True
    for module, row in rows.items():
        met = row["score"] is not None and row["score"] >= TARGET and not row["not_checked"]
        every_met &= met
        score = "-" if row["score"] is None else f"{row['score']:.1%}"
        table.add_row(module, str(row["mutants"]), str(row["killed"]), str(row["survived"]), str(row["excluded"]),
                      str(row["not_checked"]), score, "yes" if met else "NO")
    Console(width=120).print(table)
    return every_met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mutation")
    parser.add_argument("modules", nargs="*", help=f"core modules (default: all): {', '.join(ORDER)}")
    parser.add_argument("--max-children", type=int, default=2, help="mutants run at once (default 2)")
    parser.add_argument("--report", action="store_true", help="run nothing: tabulate the last verdicts")
    parser.add_argument("--pending", action="store_true",
                        help="rerun only the mutants an earlier run left alive (after adding tests)")
    parser.add_argument("--survivors", action="store_true", help="print the diff of each surviving mutant")
    parser.add_argument("--sample", type=int, metavar="N",
                        help="run at most N of each module's unchecked or surviving mutants, drawn at random")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.modules) - set(ORDER))
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; known: {', '.join(ORDER)}")
    modules = [m for m in ORDER if m in args.modules] or ORDER
    if args.survivors:
        for module in modules:
            survivors(module)
        return 0
    failed = 0
    if not args.report:
        print(f"{sync_unmutated()} unmutated source files refreshed in mutants/")
        failed = run_modules(modules, args.max_children, pending=args.pending, sample=args.sample)
    rows = {module: summarise(module) for module in modules}
    write_results(rows)
    every_met = print_table(rows)
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    if failed:
        print(f"mutmut failed {failed} time(s): see its output above")
    return 0 if every_met and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
