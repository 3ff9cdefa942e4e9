"""Hostile scenario files: whatever the text, the loader gives a Scenario or raises one
ScenarioError line naming the file, the line and the field. It expands no alias, recurses
without bound nowhere, reads no more than its size limit, and holds every number, id and
name to the bounds and patterns the shipped schema documents."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joynr_sim.scenario import Scenario, ScenarioError, load_scenario, parse_scenario
from joynr_sim.scenario.loader import MAX_DEPTH, MAX_FILE_BYTES, SCHEMA_PATH

BASE = """\
name: hostile
reproduces: {seed: 000_65e83c7f1cb84fd7.txt, scenario: s}
backends: [gbid1]
runtimes:
  - {id: cc1, kind: cluster-controller}
  - {id: app1, kind: libjoynr, cc: cc1}
steps:
  - register: {runtime: cc1, provider: p1, domain: d, interface: joynrsim/Echo}
  - proxy: {runtime: app1, name: px, domain: d, interface: joynrsim/Echo}
"""
NEXT = 10  # the line of a step appended to BASE


def _fails(tmp_path: Path, text: str | bytes, line: int, field: str, words: str) -> ScenarioError:
    path = tmp_path / "hostile.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    err = info.value
    assert (err.path, err.line, err.field) == (path, line, field), str(err)
    where = f"{path}:{line}" if line else f"{path}"
    assert str(err).startswith(f"{where}: {field}: "), str(err)
    assert words in err.message, str(err)
    assert "\n" not in str(err) and "\r" not in str(err) and len(err.message) < 300, str(err)
    return err


def test_base_loads(tmp_path: Path) -> None:
    assert parse_scenario(BASE).name == "hostile"


# -- anchors and aliases ----------------------------------------------------------------------

def _laughs(levels: int = 9) -> str:
    lines = ["lol0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"lol{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


ALIASES = [
    ("billion-laughs", _laughs() + BASE, 1, "lol0"),
    ("laughs-in-args", BASE + "  - call: {proxy: px, method: echo, args: &a [1, 2]}\n", NEXT,
     "steps[2].call.args"),
    ("recursive-alias", BASE + "  - call: {proxy: px, method: echo, args: &a [*a]}\n", NEXT,
     "steps[2].call.args"),
    ("alias-of-nothing", BASE.replace("scenario: s}", "scenario: *s}"), 2, "reproduces.scenario"),
    ("anchored-scalar", BASE.replace("name: hostile", "name: &n hostile"), 1, "name"),
    ("alias-as-key", BASE + "*k : 1\n", NEXT, "(top)"),
]


@pytest.mark.parametrize("case", ALIASES, ids=[c[0] for c in ALIASES])
def test_anchors_and_aliases_are_refused(tmp_path: Path, case: tuple) -> None:
    _, text, line, field = case
    _fails(tmp_path, text, line, field, "anchors and aliases (&name, *name) are not supported")


def test_merge_keys_are_refused(tmp_path: Path) -> None:
    _fails(tmp_path, BASE + "  - cut: {<<: {runtime: cc1}, gbid: gbid1}\n", NEXT, "steps[2].cut",
           "merge keys (<<) are not supported")


# -- nesting ----------------------------------------------------------------------------------

@pytest.mark.parametrize("open_, close", [("[", "]"), ("{a: ", "}")], ids=["lists", "mappings"])
def test_deep_flow_nesting_is_an_error_not_a_recursion_error(tmp_path: Path, open_: str, close: str) -> None:
    text = BASE + "  - call: {proxy: px, method: echo, args: [" + open_ * 10_000 + "1" + close * 10_000 + "]}\n"
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.line == NEXT and info.value.field.startswith("steps[2].call.args[0]")
    assert f"nested deeper than {MAX_DEPTH} levels" in str(info.value)


def test_deep_block_nesting_is_an_error(tmp_path: Path) -> None:
    text = BASE + "  - call:\n      proxy: px\n      method: echo\n      args:\n" + "        " + "- " * 10_000 + "x\n"
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert info.value.line == NEXT + 4 and "nested deeper than" in str(info.value)


def test_nesting_up_to_the_limit_loads() -> None:
    def text(depth: int) -> str:
        return BASE + "  - call: {proxy: px, method: echo, args: " + "[" * depth + "]" * depth + "}\n"

    inner = MAX_DEPTH - 4  # top, steps, the step and call hold the args
    assert parse_scenario(text(inner)).steps[2].kind == "call"
    with pytest.raises(ScenarioError, match=f"nested deeper than {MAX_DEPTH} levels"):
        parse_scenario(text(inner + 1))


# -- control characters -----------------------------------------------------------------------

@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f", "\ufffe"])
def test_control_characters_in_the_text(tmp_path: Path, char: str) -> None:
    text = BASE + f"  - advance: 1{char}0\n"
    _fails(tmp_path, text, NEXT, "(yaml)", f"character U+{ord(char):04X} is not allowed in YAML")


ESCAPED = [  # (where, text, line, field) with a control character written as an escape
    ("runtime-id", BASE.replace("id: cc1,", 'id: "cc1\\0",'), 5, "runtimes[0].id"),
    ("cc-id", BASE.replace("id: cc1,", 'id: cc1, cc_id: "c\\x01",'), 5, "runtimes[0].cc_id"),
    ("backend", BASE.replace("[gbid1]", '["gbid1\\e"]'), 3, "backends[0]"),
    ("provider", BASE.replace("provider: p1", 'provider: "p\\a1"'), 8, "steps[0].register.provider"),
    ("domain", BASE.replace("domain: d,", 'domain: "d\\0",', 1), 8, "steps[0].register.domain"),
    ("participant", BASE + '  - expect_gcd: {participant: "x\\u0085y"}\n', NEXT,
     "steps[2].expect_gcd.participant"),
    ("name", BASE.replace("name: hostile", 'name: "host\\0ile"'), 1, "name"),
    ("seed", BASE.replace("seed: 000_65e83c7f1cb84fd7.txt", 'seed: "\\t000.txt"'), 2, "reproduces.seed"),
    ("scenario-text", BASE.replace("scenario: s}", 'scenario: "s\\0"}'), 2, "reproduces.scenario"),
    ("description", BASE + 'description: "a\\x1bb"\n', NEXT, "description"),
]


@pytest.mark.parametrize("case", ESCAPED, ids=[c[0] for c in ESCAPED])
def test_control_characters_in_ids_and_names(tmp_path: Path, case: tuple) -> None:
    _, text, line, field = case
    _fails(tmp_path, text, line, field, "does not match")


def test_control_character_in_a_key_shows_on_one_line(tmp_path: Path) -> None:
    err = _fails(tmp_path, BASE + '"na\\0me\\n": x\n', NEXT, "['na\\x00me\\n']", "unknown key")
    assert "expected one of name, description" in err.message


# -- numbers ----------------------------------------------------------------------------------

NUMBERS = [
    ("5000-digits", "advance: " + "9" * 5000, "steps[2].advance", "(5000 characters) as int"),
    ("5000-digits-in-args", "call: {proxy: px, method: echo, args: [" + "1" * 5000 + "]}",
     "steps[2].call.args[0]", "integers have at most 64 bits"),
    ("2**63", "advance: 9223372036854775808", "steps[2].advance", "integers have at most 64 bits"),
    ("-2**63-1", "call: {proxy: px, method: echo, args: [-9223372036854775809]}",
     "steps[2].call.args[0]", "integers have at most 64 bits"),
    ("binary-int", "advance: 0b" + "1" * 70, "steps[2].advance", "integers have at most 64 bits"),
    ("float-advance", "advance: 5000.0", "steps[2].advance", "expected an integer, got 5000.0"),
    ("float-ttl", "call: {proxy: px, method: echo, ttl_ms: 1.5}", "steps[2].call.ttl_ms",
     "expected an integer, got 1.5"),
    ("inf", "advance: .inf", "steps[2].advance", "expected an integer, got inf"),
    ("nan", "wait: {until: {event: {ev: step}}, timeout_ms: .nan}", "steps[2].wait.timeout_ms",
     "expected an integer, got nan"),
    ("exponent-is-a-string", "expect_calls: {proxy: px, method: echo, count: 1e3}",
     "steps[2].expect_calls.count", "expected an integer, got '1e3' (a string)"),
    ("bool-advance", "advance: true", "steps[2].advance", "expected an integer, got true"),
    ("yes-count", "expect_calls: {proxy: px, method: echo, count: yes}",
     "steps[2].expect_calls.count", "expected an integer, got true"),
    ("bool-port", ("add_route: {runtime: cc1, participant: x, address: {type: WebSocket, host: h, "
                   "port: false}}"), "steps[2].add_route.address.port", "expected an integer, got false"),
    ("negative-advance", "advance: -1", "steps[2].advance", "must be at least 0, got -1"),
]


@pytest.mark.parametrize("case", NUMBERS, ids=[c[0] for c in NUMBERS])
def test_numbers_must_be_integers_of_64_bits(tmp_path: Path, case: tuple) -> None:
    _, step, field, words = case
    _fails(tmp_path, BASE + f"  - {step}\n", NEXT, field, words)


TEN_YEARS_MS = 10 * 365 * 24 * 3600 * 1000
BOUNDS = [  # (field, step with {v}, maximum)
    ("steps[2].advance", "advance: {v}", TEN_YEARS_MS),
    ("steps[2].call.ttl_ms", "call: {{proxy: px, method: echo, ttl_ms: {v}}}", 24 * 3600 * 1000),
    ("steps[2].one_way.ttl_ms", "one_way: {{proxy: px, method: echo, ttl_ms: {v}}}", 24 * 3600 * 1000),
    ("steps[2].expect_calls.count", "expect_calls: {{proxy: px, method: echo, count: {v}}}", 10_000),
    ("steps[2].wait.timeout_ms", "wait: {{until: {{event: {{ev: step}}}}, timeout_ms: {v}}}", 600_000),
    ("steps[2].wait.until.event.count", "wait: {{until: {{event: {{ev: step, count: {v}}}}}}}", 10_000),
    ("steps[2].proxy.cache_max_age_ms",
     "proxy: {{runtime: cc1, name: p2, domain: d, interface: joynrsim/Echo, cache_max_age_ms: {v}}}",
     TEN_YEARS_MS),
    ("steps[2].add_route.address.port",
     "add_route: {{runtime: cc1, participant: x, address: {{type: WebSocket, host: h, port: {v}}}}}",
     65535),
]


@pytest.mark.parametrize("case", BOUNDS, ids=[c[0] for c in BOUNDS])
def test_upper_bounds(tmp_path: Path, case: tuple) -> None:
    field, step, maximum = case
    assert parse_scenario(BASE + f"  - {step.format(v=maximum)}\n").steps[2]
    _fails(tmp_path, BASE + f"  - {step.format(v=maximum + 1)}\n", NEXT, field,
           f"must be at most {maximum}, got {maximum + 1}")


def test_detached_timeout_bound(tmp_path: Path) -> None:
    line = "  - {id: cc1, kind: cluster-controller}\n"
    ok = BASE.replace(line, line.replace("}", f", detached_timeout_ms: {TEN_YEARS_MS}}}"))
    assert parse_scenario(ok).runtimes[0].detached_timeout_ms == TEN_YEARS_MS
    bad = BASE.replace(line, line.replace("}", f", detached_timeout_ms: {TEN_YEARS_MS + 1}}}"))
    _fails(tmp_path, bad, 5, "runtimes[0].detached_timeout_ms", f"must be at most {TEN_YEARS_MS}")


def test_step_count_bound(tmp_path: Path) -> None:
    assert len(parse_scenario(BASE + "  - advance: 1\n" * (10_000 - 2)).steps) == 10_000
    _fails(tmp_path, BASE + "  - advance: 1\n" * (10_000 - 1), 7, "steps",
           "must have at most 10000 items, got 10001")


# -- ids and names ----------------------------------------------------------------------------

IDS = [
    ("trailing-newline", BASE.replace("id: cc1,", 'id: "cc1\\n",'), 5, "runtimes[0].id"),
    ("block-scalar", BASE.replace("  - {id: app1, kind: libjoynr, cc: cc1}\n",
                                  "  - kind: libjoynr\n    cc: cc1\n    id: |\n      app1\n"),
     8, "runtimes[1].id"),
    ("trailing-space", BASE.replace("id: cc1,", 'id: "cc1 ",'), 5, "runtimes[0].id"),
    ("leading-space", BASE.replace("cc: cc1}", 'cc: " cc1"}'), 6, "runtimes[1].cc"),
    ("tab", BASE.replace("[gbid1]", '["gbid1\\t"]'), 3, "backends[0]"),
    ("lookalike", BASE.replace("id: app1", "id: аpp1"), 6, "runtimes[1].id"),  # Cyrillic a
    ("path", BASE.replace("id: app1", "id: ../app1"), 6, "runtimes[1].id"),
    ("65-characters", BASE.replace("id: app1", "id: " + "a" * 65), 6, "runtimes[1].id"),
    ("proxy-name-newline", BASE.replace("name: px", 'name: "px\\n"'), 9, "steps[1].proxy.name"),
    ("participant-newline", BASE + '  - expect_gcd: {participant: "x\\n"}\n', NEXT,
     "steps[2].expect_gcd.participant"),
    ("at-name-newline", BASE + '  - expect_gcd: {participant: "@p1\\n"}\n', NEXT,
     "steps[2].expect_gcd.participant"),
    ("method-unicode", BASE + "  - call: {proxy: px, method: echö}\n", NEXT, "steps[2].call.method"),
    ("scenario-name-newline", BASE.replace("name: hostile", 'name: "hostile\\n"'), 1, "name"),
    ("blank-seed-wording", BASE.replace("scenario: s}", 'scenario: " \\n"}'), 2,
     "reproduces.scenario"),
]


@pytest.mark.parametrize("case", IDS, ids=[c[0] for c in IDS])
def test_ids_match_their_pattern_to_the_end(tmp_path: Path, case: tuple) -> None:
    _, text, line, field = case
    _fails(tmp_path, text, line, field, "does not match")


def test_longest_id_loads() -> None:
    rid = "a" * 64
    assert parse_scenario(BASE.replace("app1", rid)).runtimes[1].id == rid


@pytest.mark.parametrize("rid", ["runner", "brokers", "gcd-gbid1", "gcd-x"])
@pytest.mark.parametrize("line", [5, 6], ids=["cluster-controller", "libjoynr"])
def test_reserved_runtime_ids(tmp_path: Path, rid: str, line: int) -> None:
    _fails(tmp_path, BASE.replace("cc1" if line == 5 else "app1", rid), line, f"runtimes[{line - 5}].id",
           "is reserved: runner, brokers and gcd-* name")


@pytest.mark.parametrize("rid", ["gcd", "runners", "my-runner", "gcdx", "Brokers1"])
def test_ids_near_the_reserved_ones_load(rid: str) -> None:
    assert parse_scenario(BASE.replace("app1", rid)).runtimes[1].id == rid


# -- whole files ------------------------------------------------------------------------------

FILES = [
    ("latin-1", BASE.replace("scenario: s", "scenario: café").encode("latin-1"), 2, "(file)",
     "not UTF-8: byte 0xe9"),
    ("utf-16", BASE.encode("utf-16"), 1, "(file)", "not UTF-8: byte 0xff at offset 0"),
    ("empty", b"", 1, "(file)", "empty file"),
    ("blank", b"\n  \n", 1, "(file)", "empty file"),
    ("comments", b"# a scenario\n# to come\n", 1, "(file)", "empty file"),
    ("document-marker", b"---\n", 2, "(top)", "expected a mapping, got nothing (null)"),
    ("top-list", b"- name: x\n", 1, "(top)", "expected a mapping, got a list"),
    ("top-string", b"scenario\n", 1, "(top)", "expected a mapping, got 'scenario' (a string)"),
    ("top-number", b"42\n", 1, "(top)", "expected a mapping, got 42 (an integer)"),
    ("two-documents", (BASE + "---\n" + BASE).encode(), NEXT, "(yaml)", "a second YAML document"),
    ("python-object", BASE.encode() + b"  - advance: !!python/object/apply:os.system [echo]\n",
     NEXT, "steps[2].advance", "YAML tag 'tag:yaml.org,2002:python/object/apply:os.system'"),
    ("python-name", BASE.encode() + b"  - advance: !!python/name:os.system ''\n", NEXT,
     "steps[2].advance", "python/name:os.system is not supported"),
    ("binary", BASE.encode() + b"  - call: {proxy: px, method: echo, args: [!!binary aGk=]}\n",
     NEXT, "steps[2].call.args[0]", "a YAML binary is not supported"),
    ("date", BASE.encode() + b"  - call: {proxy: px, method: echo, args: [2001-12-14]}\n", NEXT,
     "steps[2].call.args[0]", "a YAML timestamp is not supported here; write a string (quote it)"),
    ("set", BASE.encode() + b"  - call: {proxy: px, method: echo, args: [!!set {a, b}]}\n", NEXT,
     "steps[2].call.args[0]", "YAML tag 'tag:yaml.org,2002:set' is not supported"),
    ("local-tag", BASE.encode() + b"  - advance: !ms 10\n", NEXT, "steps[2].advance",
     "a YAML !ms is not supported"),
    ("int-key", BASE.encode() + b"1: x\n", NEXT, "(top)", "keys must be strings, got 1"),
    ("null-key", BASE.encode() + b"~: x\n", NEXT, "(top)", "keys must be strings, got None"),
    ("complex-key", BASE.encode() + b"? [a, b]\n: x\n", NEXT, "(top)",
     "keys must be strings, got a list or mapping"),
    ("bad-bool", BASE.encode() + b"  - call: {proxy: px, method: echo, args: [!!bool maybe]}\n",
     NEXT, "steps[2].call.args[0]", "cannot read 'maybe' as bool"),
]


@pytest.mark.parametrize("case", FILES, ids=[c[0] for c in FILES])
def test_whole_file_problems(tmp_path: Path, case: tuple) -> None:
    _, raw, line, field, words = case
    _fails(tmp_path, raw, line, field, words)


def test_file_size_is_bounded(tmp_path: Path) -> None:
    padding = MAX_FILE_BYTES - len(BASE.encode()) - 2
    at_limit = BASE + "#" + "x" * padding + "\n"
    assert len(at_limit.encode()) == MAX_FILE_BYTES
    path = tmp_path / "big.yaml"
    path.write_text(at_limit)
    assert load_scenario(path).name == "hostile"
    _fails(tmp_path, at_limit + "\n", 0, "(file)", "larger than 256 KiB")
    with pytest.raises(ScenarioError, match="larger than 256 KiB"):
        parse_scenario(at_limit + "x" * MAX_FILE_BYTES)


@pytest.mark.parametrize("special", ["folder", "device"])
def test_only_regular_files_are_read(tmp_path: Path, special: str) -> None:
    """A FIFO or a device could block or never end; an empty device is no empty file."""
    path = Path(os.devnull)
    if special == "folder":
        path = tmp_path / "folder.yaml"
        path.mkdir()
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert (info.value.line, info.value.field) == (0, "(file)")
    assert "not a regular file" in str(info.value)


def test_the_first_problem_by_line_is_reported(tmp_path: Path) -> None:
    text = BASE.replace("name: hostile", "name: Hostile") + "colour: red\n"
    _fails(tmp_path, text, 1, "name", "'Hostile' does not match")


# -- anything at all --------------------------------------------------------------------------

def _outcome(text: str) -> Scenario | ScenarioError:
    try:
        return parse_scenario(text, "any.yaml")
    except ScenarioError as err:
        assert str(err).startswith("any.yaml"), str(err)
        assert "\n" not in str(err) and "\r" not in str(err), str(err)
        return err


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_any_text_gives_a_scenario_or_one_error_line(text: str) -> None:
    assert isinstance(_outcome(text), (Scenario, ScenarioError))


YAML_BITS = st.sampled_from([
    "[", "]", "{", "}", ":", ": ", ",", "-", "- ", "&a ", "*a", "!!", "!x ", "|", ">", "'", '"',
    "#", "%", "@", "?", "\n", "\n  ", "\t", " ", "\\", "\\0", "\\n", "0", "9" * 30, "1.5", "~",
    "null", "yes", "<<", "---", "...", "\x00", "\x85", "\u2028", "\ufeff", "é",
])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(BASE)), st.integers(0, 3), YAML_BITS), max_size=6))
def test_mutated_scenarios_give_a_scenario_or_one_error_line(edits: list) -> None:
    text = BASE
    for pos, cut, bit in edits:
        pos = min(pos, len(text))
        text = text[:pos] + bit + text[pos + cut:]
    assert isinstance(_outcome(text), (Scenario, ScenarioError))


@functools.cache
def _editor_schema() -> jsonschema.Draft202012Validator:
    """The shipped schema as an editor reads it, without the loader's adjustments."""
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


def _paths(value: object, at: tuple = ()) -> list[tuple]:
    out = [at]
    if isinstance(value, dict):
        out += [p for k, v in value.items() for p in _paths(v, (*at, k))]
    elif isinstance(value, list):
        out += [p for i, v in enumerate(value) for p in _paths(v, (*at, i))]
    return out


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
    | st.sampled_from(["cc1", "app1", "gbid1", "px", "p1", "@p1", "runner", "gcd-1", "Mqtt", "echo"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["runtime", "gbid", "id", "kind", "participant", "type", "x"]) | st.text(max_size=5),
        inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_loader_rejects_what_the_schema_rejects(data: st.DataObject) -> None:
    """Replace one value of a valid file by anything: when the schema (read as an editor
    reads it) rejects the result, the loader does too; what the loader accepts, the schema
    accepts."""
    doc = yaml.safe_load(BASE + "  - call: {proxy: px, method: echo, args: [1], ttl_ms: 5}\n"
                         "  - wait: {until: {route: {runtime: cc1, participant: '@px', type: Mqtt}}}\n")
    at = data.draw(st.sampled_from(_paths(doc)[1:]))
    target = doc
    for part in at[:-1]:
        target = target[part]
    target[at[-1]] = data.draw(JSON_VALUES)
    outcome = _outcome(yaml.safe_dump(doc))
    schema_ok = _editor_schema().is_valid(doc)
    if not schema_ok:
        assert isinstance(outcome, ScenarioError)
    if isinstance(outcome, Scenario):
        assert schema_ok
