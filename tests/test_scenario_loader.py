"""The scenario loader and the shipped JSON Schema: valid files load with defaults filled in;
each kind of bad input names file, line and field; the schema agrees with the loader;
``joynr-sim list`` shows them."""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import yaml

from joynr_sim.cli import main
from joynr_sim.core.address import ADDRESS_TYPES
from joynr_sim.core.policies import POLICIES
from joynr_sim.runtime.participants import INTERFACES
from joynr_sim.scenario import (
    RuntimeSpec,
    Scenario,
    ScenarioError,
    Step,
    load_scenario,
    load_scenarios,
)
from joynr_sim.scenario.loader import SCHEMA_PATH
from joynr_sim.scenario.model import (
    CLUSTER_CONTROLLER,
    DEFAULT_BROKER,
    DEFAULT_POLICY,
    LIBJOYNR,
    POLICY_NAMES,
    STEP_KINDS,
    participant_ref,
    thaw,
)
from joynr_sim.trace import EVENTS

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios"

WS_CRASH = """\
name: ws-provider-global-crash
description: A provider in a libjoynr runtime registers globally, crashes, registers again.
reproduces:
  seed: 000_65e83c7f1cb84fd7.txt
  scenario: "A websocket provider registers globally: crash and re-register"
backends: [gbid1, gbid2]
runtimes:
  - {id: cc1, kind: cluster-controller, gbids: [gbid1]}
  - {id: cc2, kind: cluster-controller}
  - {id: app1, kind: libjoynr, cc: cc1}
  - {id: app2, kind: libjoynr, cc: cc2}
steps:
  - register: {runtime: app1, provider: p1, domain: d, interface: joynrsim/Echo, participant_id: fixed-1, gbids: [gbid1]}
  - proxy: {runtime: app2, name: px, domain: d, interface: joynrsim/Echo}
  - call: {proxy: px, method: echo, args: [hi], ttl_ms: 5000, expect: {result: hi}}
  - crash: app1
  - advance: 5000
  - register: {runtime: app1, provider: p1b, domain: d, interface: joynrsim/Echo, participant_id: fixed-1, scope: GLOBAL}
  - wait:
      until: {route: {runtime: cc1, participant: "@p1b", type: WebSocketClient}}
  - expect_route: {runtime: cc2, participant: fixed-1, type: Mqtt, gbid: gbid1, sticky: false, visible: true}
  - expect_gcd: {participant: "@p1", gbids: [gbid1]}
  - expect_calls: {proxy: px, method: echo, args: [hi], count: 10, ttl_ms: 3000, expect: {result: hi}}
"""

GCD_BACKENDS = """\
name: gcd-old-and-new-lookups
reproduces: {seed: 001_2030eddcb973837f.txt, scenario: "lookup in a backend the provider is not in"}
policy: gcd-trust
broker: "gbid1=mqtt://127.0.0.1:1883,gbid2=mqtt://127.0.0.1:1884"
backends: [gbid1, gbid2]
runtimes:
  - id: cc-old
    kind: cluster-controller
    gbids: [gbid2]
    cc_id: shared-cc
    old_joynr: true
  - {id: cc-new, kind: cluster-controller, cc_id: shared-cc}
steps:
  - register: {runtime: cc-new, provider: counter, domain: d, interface: joynrsim/Counter, scope: GLOBAL, gbids: [gbid1]}
  - proxy: {runtime: cc-old, name: miss, domain: d, interface: joynrsim/Counter, scope: GLOBAL_ONLY, gbids: [gbid2], cache_max_age_ms: 0, expect_error: NO_ENTRY_FOR_SELECTED_BACKENDS}
  - proxy: {runtime: cc-old, name: direct, participant: "@counter", interface: joynrsim/Counter, expect_error: null}
  - one_way: {proxy: direct, method: increment}
  - call: {proxy: direct, method: get, expect: {timeout: true}}
  - cut: {runtime: cc-old, gbid: gbid2}
  - heal: {runtime: cc-old, gbid: gbid2}
  - wait: {until: {connected: {runtime: cc-old, gbid: gbid2}}, timeout_ms: 2000}
  - stop_broker: gbid1
  - start_broker: gbid1
  - wait: {until: {gcd: {participant: "@counter", present: false}}}
  - add_route: {runtime: cc-old, participant: gcd-1, address: {type: WebSocketClient, id: c1}, sticky: false}
  - add_route: {runtime: cc-new, participant: gcd-2, address: {type: WebSocket, host: localhost, port: 4242}}
  - expect_route: {runtime: cc-new, participant: "@direct", type: absent}
  - stop: cc-new
  - start: cc-new
  - restart: cc-old
  - crash_broker: gbid2
  - restart_broker: gbid2
  - unregister: {runtime: cc-new, provider: counter}
"""

MINIMAL = """\
name: minimal
reproduces: {seed: 002_ed27daa13e583359.txt, scenario: nothing happens}
backends: [joynrdefaultgbid]
runtimes: [{id: cc, kind: cluster-controller}]
steps: []
"""

VALID = {"ws-crash": WS_CRASH, "gcd-backends": GCD_BACKENDS, "minimal": MINIMAL}

# Bad files share this head; the step under test is line 9.
HEAD = """\
name: bad
reproduces: {seed: 000_65e83c7f1cb84fd7.txt, scenario: s}
backends: [gbid1, gbid2]
runtimes:
  - {id: cc1, kind: cluster-controller, gbids: [gbid1]}
  - {id: app1, kind: libjoynr, cc: cc1}
steps:
  - register: {runtime: app1, provider: p1, domain: d, interface: joynrsim/Echo}
"""

# (id, text, line, field, words in the message, whether the schema alone rejects it)
BAD = [
    ("unknown-top-key", HEAD + "colour: red\n", 9, "colour", "unknown key", True),
    ("unknown-step-key",
     HEAD + "  - proxy: {runtime: app1, name: px, domain: d, interface: joynrsim/Echo, scop: GLOBAL}\n",
     9, "steps[1].proxy.scop", "unknown key", True),
    ("unknown-nested-key",
     HEAD + "  - wait: {until: {route: {runtime: cc1, participant: x, type: Mqtt, colour: 1}}}\n",
     9, "steps[1].wait.until.route.colour", "unknown key", True),
    ("unknown-runtime-key",
     HEAD.replace("cc: cc1}", "cc: cc1, gbids: [gbid1]}"), 6, "runtimes[1].gbids",
     "unknown key for kind libjoynr", True),
    ("wrong-type-scalar", HEAD + "  - advance: soon\n", 9, "steps[1].advance",
     "expected an integer, got 'soon'", True),
    ("wrong-type-list", HEAD.replace("backends: [gbid1, gbid2]", "backends: gbid1"), 3,
     "backends", "expected a list", True),
    ("wrong-type-number-for-string",
     HEAD + "  - register: {runtime: app1, provider: p2, domain: d, interface: joynrsim/Echo, "
     "participant_id: 12}\n", 9, "steps[1].register.participant_id", "quote it", True),
    ("bad-enum", HEAD.replace("name: bad", "name: bad\npolicy: newest"), 2, "policy",
     "'newest' is not one of precedence", True),
    ("missing-required", HEAD.replace("backends: [gbid1, gbid2]\n", ""), 1, "(top)",
     "missing required key 'backends'", True),
    ("unknown-step-kind", HEAD + "  - explode: app1\n", 9, "steps[1].explode",
     "unknown step kind 'explode'", True),
    ("two-keys-in-a-step", HEAD + "  - crash: app1\n    stop: app1\n", 9, "steps[1]",
     "one key", True),
    ("expect-two-outcomes",
     HEAD + "  - proxy: {runtime: app1, name: px, domain: d, interface: joynrsim/Echo}\n"
     "  - call: {proxy: px, method: echo, expect: {result: 1, timeout: true}}\n",
     10, "steps[2].call.expect", "exactly one of result, error, timeout", True),
    ("proxy-domain-and-participant",
     HEAD + "  - proxy: {runtime: app1, name: px, domain: d, participant: x, "
     "interface: joynrsim/Echo}\n", 9, "steps[1].proxy", "exactly one of domain, participant",
     True),
    ("unknown-runtime", HEAD + "  - crash: app9\n", 9, "steps[1].crash",
     "unknown runtime 'app9'", False),
    ("unknown-runtime-in-step",
     HEAD + "  - expect_route:\n      runtime: cc9\n      participant: x\n      type: Mqtt\n",
     10, "steps[1].expect_route.runtime", "unknown runtime 'cc9'", False),
    ("wrong-runtime-kind", HEAD + "  - cut: {runtime: app1, gbid: gbid1}\n", 9,
     "steps[1].cut.runtime", "'app1' is a libjoynr runtime", False),
    ("libjoynr-cc-not-a-cc", HEAD.replace("cc: cc1}", "cc: app1}"), 6, "runtimes[1].cc",
     "not a cluster-controller runtime", False),
    ("duplicate-runtime-id", HEAD.replace("id: app1", "id: cc1"), 6, "runtimes[1].id",
     "used twice", False),
    ("gbid-not-a-backend", HEAD + "  - crash_broker: gbid7\n", 9, "steps[1].crash_broker",
     "'gbid7' is not one of the backends", False),
    ("gbid-not-of-the-cc", HEAD + "  - cut: {runtime: cc1, gbid: gbid2}\n", 9, "steps[1].cut.gbid",
     "not one of cc1's GBIDs", False),
    ("register-gbid-not-of-the-cc",
     HEAD + "  - register: {runtime: app1, provider: p2, domain: d, interface: joynrsim/Echo, "
     "gbids: [gbid1, gbid2]}\n", 9, "steps[1].register.gbids[1]", "cluster controller cc1", False),
    ("cc-gbid-not-a-backend", HEAD.replace("gbids: [gbid1]}", "gbids: [gbid3]}"), 5,
     "runtimes[0].gbids[0]", "'gbid3' is not one of the backends", False),
    ("broker-gbid-not-a-backend",
     HEAD.replace("name: bad", "name: bad\nbroker: gbid1=mqtt://h:1,gbid2=mqtt://h:2,gbid9=mqtt://h:3"),
     2, "broker", "GBID(s) gbid9 that are not backends (gbid1, gbid2)", False),
    ("broker-misses-a-backend",
     HEAD.replace("name: bad", "name: bad\nbroker: gbid1=mqtt://h:1"), 2,
     "broker", "no URL for backend(s) gbid2", False),
    ("broker-not-a-choice", HEAD.replace("name: bad", "name: bad\nbroker: rabbitmq"), 2,
     "broker", "expected 'amqtt', 'mosquitto' or 'gbid=mqtt://host:port,...', got 'rabbitmq'",
     False),
    ("broker-password-kept-out",
     HEAD.replace("name: bad", "name: bad\nbroker: gbid1=mqtt://u:s3cret@h:1/x,gbid2=mqtt://h:2"),
     2, "broker", "may only have a host and a port", False),
    ("unknown-trace-event",
     HEAD + "  - wait: {until: {event: {ev: link.vanish}}}\n", 9, "steps[1].wait.until.event.ev",
     "'link.vanish' is not a trace event", False),
    ("at-name-undefined",
     HEAD + "  - expect_route: {runtime: cc1, participant: \"@p2\", type: WebSocketClient}\n", 9,
     "steps[1].expect_route.participant", "@p2 names no provider or proxy", False),
    ("at-name-defined-later",
     HEAD + "  - expect_gcd: {participant: \"@px\"}\n"
     "  - proxy: {runtime: app1, name: px, domain: d, interface: joynrsim/Echo}\n", 9,
     "steps[1].expect_gcd.participant", "defined by an earlier step", False),
    ("provider-name-twice",
     HEAD + "  - register: {runtime: cc1, provider: p1, domain: d, interface: joynrsim/Add}\n", 9,
     "steps[1].register.provider", "already used", False),
    ("call-unknown-proxy", HEAD + "  - call: {proxy: px, method: echo}\n", 9,
     "steps[1].call.proxy", "names no proxy", False),
    ("call-unknown-method",
     HEAD + "  - proxy: {runtime: app1, name: px, domain: d, interface: joynrsim/Echo}\n"
     "  - one_way: {proxy: px, method: increment}\n", 10, "steps[2].one_way.method",
     "joynrsim/Echo has no method 'increment'", False),
    ("unregister-other-runtime", HEAD + "  - unregister: {runtime: cc1, provider: p1}\n", 9,
     "steps[1].unregister.runtime", "lives in 'app1'", False),
    ("route-gbid-without-mqtt",
     HEAD + "  - expect_route: {runtime: cc1, participant: x, type: InProcess, gbid: gbid1}\n", 9,
     "steps[1].expect_route.gbid", "only goes with type Mqtt", False),
    ("duplicate-yaml-key", HEAD.replace("name: bad", "name: bad\nname: worse"), 2, "name",
     "duplicate key", None),
    ("yaml-syntax-error", HEAD + "  - crash: app1\n   - stop: app1\n", 10, "(yaml)",
     "expected <block end>", None),
    ("yaml-unclosed-flow", HEAD + "  - cut: {runtime: cc1, gbid: gbid1\n  - crash: cc1\n", 10,
     "(yaml)", "flow mapping", None),
]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@functools.cache
def _schema_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


# -- valid files ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", VALID)
def test_valid_examples_pass_the_loader_and_the_schema(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, name, VALID[name])
    scenario = load_scenario(path)
    assert isinstance(scenario, Scenario) and scenario.path == path
    errors = list(_schema_validator().iter_errors(yaml.safe_load(VALID[name])))
    assert errors == [], [e.message for e in errors]


def test_ws_crash_model(tmp_path: Path) -> None:
    s = load_scenario(_write(tmp_path, "ws", WS_CRASH))
    assert s.name == "ws-provider-global-crash"
    assert s.reproduces.seed == "000_65e83c7f1cb84fd7.txt"
    assert s.reproduces.scenario.startswith("A websocket provider")
    assert (s.policy, s.broker, s.backends) == ("precedence", "amqtt", ("gbid1", "gbid2"))
    assert s.runtimes[0] == RuntimeSpec("cc1", "cluster-controller", ("gbid1",), "cc1", None, False)
    # gbids default to every backend, cc_id to the runtime id
    assert s.runtimes[1] == RuntimeSpec("cc2", "cluster-controller", ("gbid1", "gbid2"), "cc2",
                                        None, False)
    assert s.runtimes[2] == RuntimeSpec("app1", "libjoynr", (), None, "cc1", False)
    assert s.cluster_controller_of("app1").id == "cc1"
    assert [st.kind for st in s.steps][:5] == ["register", "proxy", "call", "crash", "advance"]
    assert [st.line for st in s.steps][:3] == [13, 14, 15]
    assert [st.index for st in s.steps] == list(range(len(s.steps)))

    register = s.steps[0]
    assert dict(register.args) == {
        "runtime": "app1", "provider": "p1", "domain": "d", "interface": "joynrsim/Echo",
        "participant_id": "fixed-1", "scope": "GLOBAL", "gbids": ("gbid1",), "expect_error": None,
    }
    proxy = s.steps[1].args
    assert (proxy["scope"], proxy["gbids"], proxy["participant"]) == ("LOCAL_THEN_GLOBAL", None, None)
    assert thaw(s.steps[2].args) == {"proxy": "px", "method": "echo", "args": ["hi"],
                                     "ttl_ms": 5000, "expect": {"result": "hi"}}
    assert dict(s.steps[3].args) == {"runtime": "app1"}
    assert dict(s.steps[4].args) == {"ms": 5000}
    wait = s.steps[6]
    assert wait.args["timeout_ms"] == 5000 and wait.line == 19
    assert participant_ref(wait.args["until"]["route"]["participant"]) == "p1b"
    assert participant_ref("fixed-1") is None
    assert s.steps[8].args["present"] is True

    assert [st.title for st in s.steps] == [
        "register p1 on app1 (joynrsim/Echo, GLOBAL)",
        "proxy px on app2 -> d/joynrsim/Echo",
        "call px.echo",
        "crash app1",
        "advance 5000 ms",
        "register p1b on app1 (joynrsim/Echo, GLOBAL)",
        "wait for route @p1b on cc1 = WebSocketClient",
        "expect route fixed-1 on cc2 = Mqtt",
        "expect gcd @p1 in gbid1",
        "10x call px.echo",
    ]


def test_gcd_backends_model(tmp_path: Path) -> None:
    s = load_scenario(_write(tmp_path, "gcd", GCD_BACKENDS))
    assert s.policy == "gcd-trust" and s.broker.startswith("gbid1=")
    old, new = s.runtimes
    assert (old.cc_id, old.old_joynr, old.gbids) == ("shared-cc", True, ("gbid2",))
    assert (new.cc_id, new.old_joynr) == ("shared-cc", False)
    kinds = {st.kind for st in s.steps}
    # the link faults and background calls have their own tests (test_scenario_faults.py,
    # test_memory_faults.py), so do the subscription steps (test_scenario_subscriptions.py)
    new = {"partition", "blackhole", "delay", "duplicate", "reorder", "clock_skew", "start_calls", "await_calls",
           "subscribe", "unsubscribe", "publish", "expect_publications", "gcd_call"}
    assert kinds == set(STEP_KINDS) - {"crash", "advance", "expect_gcd", "expect_calls"} - new
    direct = s.steps[2].args
    assert (direct["participant"], direct["domain"]) == ("@counter", None)
    assert dict(s.steps[3].args)["args"] == ()
    assert thaw(s.steps[11].args["address"]) == {"type": "WebSocketClient", "id": "c1"}
    assert (s.steps[11].args["sticky"], s.steps[11].args["visible"]) == (False, True)
    assert thaw(s.steps[12].args["address"]) == {
        "type": "WebSocket", "host": "localhost", "port": 4242, "protocol": "WS", "path": ""}
    assert [st.title for st in s.steps][-4:] == ["restart cc-old", "crash broker gbid2",
                                                 "restart broker gbid2", "unregister counter"]


def test_step_args_are_read_only(tmp_path: Path) -> None:
    s = load_scenario(_write(tmp_path, "ws", WS_CRASH))
    step: Step = s.steps[2]
    with pytest.raises(TypeError):
        step.args["method"] = "other"  # type: ignore[index]
    with pytest.raises(TypeError):
        step.args["expect"]["result"] = "other"  # type: ignore[index]
    assert isinstance(step.args["args"], tuple)


def test_load_scenarios_from_folders_and_files(tmp_path: Path) -> None:
    folder = tmp_path / "lib"
    folder.mkdir()
    _write(folder, "b", WS_CRASH)
    _write(folder, "a", MINIMAL)
    (folder / "notes.txt").write_text("not a scenario")
    extra = _write(tmp_path, "extra", GCD_BACKENDS)
    names = [s.name for s in load_scenarios([folder, extra])]
    assert names == ["minimal", "ws-provider-global-crash", "gcd-old-and-new-lookups"]
    assert [s.name for s in load_scenarios(folder)] == ["minimal", "ws-provider-global-crash"]


# -- bad files --------------------------------------------------------------------------------

@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_input_names_file_line_and_field(tmp_path: Path, case: tuple) -> None:
    name, text, line, field, words, _ = case
    path = _write(tmp_path, name, text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    err = info.value
    assert (err.path, err.line, err.field) == (path, line, field), str(err)
    assert str(err).startswith(f"{path}:{line}: {field}: "), str(err)
    assert words in str(err)
    assert "s3cret" not in str(err)


@pytest.mark.parametrize("case", [c for c in BAD if c[5] is not None], ids=lambda c: c[0])
def test_schema_rejects_exactly_the_structural_errors(case: tuple) -> None:
    """The schema rejects what it can see; the cross-references only the loader checks."""
    name, text, *_, schema_level = case
    errors = list(_schema_validator().iter_errors(yaml.safe_load(text)))
    assert bool(errors) is schema_level, [e.message for e in errors]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(tmp_path / "nope.yaml")
    assert info.value.field == "(file)" and "cannot read" in str(info.value)


def test_a_bad_file_fails_load_scenarios_naming_it(tmp_path: Path) -> None:
    _write(tmp_path, "a", MINIMAL)
    _write(tmp_path, "b", HEAD + "  - crash: app9\n")
    with pytest.raises(ScenarioError) as info:
        load_scenarios(tmp_path)
    assert info.value.path == tmp_path / "b.yaml"


# -- the shipped schema -----------------------------------------------------------------------

def test_library_files_pass_the_schema() -> None:
    library = sorted(LIBRARY.glob("*.yaml")) + sorted(LIBRARY.glob("*/*.yaml"))
    assert len(library) >= 20
    for path in library:
        errors = list(_schema_validator().iter_errors(yaml.safe_load(path.read_text())))
        assert errors == [], (path, [e.message for e in errors])


def _subschemas(node: object) -> list[dict]:
    if isinstance(node, dict):
        return [node, *(s for v in node.values() for s in _subschemas(v))]
    if isinstance(node, list):
        return [s for v in node for s in _subschemas(v)]
    return []


def test_schema_names_the_vocabulary_of_the_code() -> None:
    """The enums the schema spells out are the names the runner and the runtimes know."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    step = schema["properties"]["steps"]["items"]
    assert tuple(step["properties"]) == STEP_KINDS
    assert tuple(schema["properties"]["policy"]["enum"]) == POLICY_NAMES == tuple(POLICIES)
    assert schema["properties"]["policy"]["default"] == DEFAULT_POLICY
    assert schema["properties"]["broker"]["default"] == DEFAULT_BROKER
    assert schema["$defs"]["interface"]["enum"] == list(INTERFACES)
    route_types = schema["$defs"]["route"]["properties"]["type"]["enum"]
    assert route_types == [*ADDRESS_TYPES, "absent"]
    kinds = schema["properties"]["runtimes"]["items"]["properties"]["kind"]["enum"]
    assert kinds == [CLUSTER_CONTROLLER, LIBJOYNR]
    event = step["properties"]["wait"]["properties"]["until"]["properties"]["event"]
    assert all(re.fullmatch(event["properties"]["ev"]["pattern"][1:-1], ev) for ev in EVENTS)


def test_schema_patterns_end_with_their_only_dollar() -> None:
    """The loader reads a pattern's final ``$`` as the end of the text (ECMA-262, as an editor
    does); a ``$`` elsewhere would be read the Python way."""
    patterns = [s["pattern"] for s in _subschemas(json.loads(SCHEMA_PATH.read_text()))
                if "pattern" in s]
    assert len(patterns) > 10
    for pattern in patterns:
        assert "$" not in pattern[:-1], pattern


def test_every_bound_is_documented() -> None:
    """Every number has an upper bound, and the description of the field says it."""
    numbers = [s for s in _subschemas(json.loads(SCHEMA_PATH.read_text()))
               if s.get("type") in ("integer", ["integer", "null"])]
    assert len(numbers) >= 8
    for spec in numbers:
        assert "maximum" in spec, spec
        if spec["maximum"] != 65535:  # a port needs no explanation
            assert f"{spec['maximum']}" in spec["description"].replace(",", ""), spec


def test_schema_is_package_data() -> None:
    text = resources.files("joynr_sim.scenario").joinpath("scenario.schema.json").read_text()
    assert json.loads(text)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


# -- joynr-sim list --------------------------------------------------------------------------

GOOD = """\
name: listed-one
reproduces: {seed: 000_65e83c7f1cb84fd7.txt, scenario: "An inprocess provider registers locally"}
policy: local-remote
backends: [gbid1]
runtimes: [{id: cc1, kind: cluster-controller}]
steps:
  - register: {runtime: cc1, provider: p, domain: d, interface: joynrsim/Add, scope: LOCAL}
  - advance: 10
"""


def _list(capsys, monkeypatch, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("COLUMNS", "220")
    code = main(["list", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_default_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "one.yaml").write_text(GOOD)
    monkeypatch.chdir(tmp_path)
    code, out, err = _list(capsys, monkeypatch)
    assert code == 0
    row = next(line for line in out.splitlines() if "listed-one" in line)
    assert "000_65e83c7f1cb84fd7.txt: An inprocess provider registers locally" in row
    assert "local-remote" in row and row.rstrip(" │").endswith("2")


def test_list_broken_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.yaml").write_text(GOOD)
    (tmp_path / "b.yaml").write_text(GOOD.replace("runtime: cc1, provider", "runtime: cc7, provider"))
    code, out, err = _list(capsys, monkeypatch, str(tmp_path))
    assert code == 2
    assert f"{tmp_path / 'b.yaml'}:7: steps[0].register.runtime: unknown runtime 'cc7'" in " ".join(err.split())


def test_list_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = _list(capsys, monkeypatch, str(tmp_path / "nope"))
    assert code == 2 and "no such file or folder" in err


def test_schema_guards_are_the_policies_and_variants() -> None:
    """An editor offers what the loader accepts: the guards enum is the registry's rule sets."""
    from joynr_sim.core.variants import RULE_SET_NAMES

    schema = json.loads(SCHEMA_PATH.read_text())
    assert tuple(schema["properties"]["guards"]["items"]["enum"]) == RULE_SET_NAMES


def test_the_last_seen_timeout_reaches_the_scenario(tmp_path: Path) -> None:
    text = (Path("scenarios/gcd-touch-keeps-entries-fresh.yaml")).read_text()
    path = tmp_path / "s.yaml"
    path.write_text(text + "gcd_last_seen_timeout_ms: 5000\n")
    assert load_scenario(path).gcd_last_seen_timeout_ms == 5000
    path.write_text(text + "gcd_last_seen_timeout_ms: 0\n")
    with pytest.raises(ScenarioError, match="gcd_last_seen_timeout_ms"):
        load_scenario(path)
