"""The subscription steps without brokers: what the loader accepts, fills in and refuses
(one line naming the field), and how expect_publications judges what arrived. Each refusal
is a broken input next to the accepted one."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from joynr_sim.core.subscriptions import SubscriptionQos
from joynr_sim.runtime.subscriber import Subscription
from joynr_sim.scenario import ScenarioError, parse_scenario
from joynr_sim.scenario.failure import StepFailed
from joynr_sim.scenario.model import thaw
from joynr_sim.scenario.subscription_steps import SubscriptionSteps

HEAD = """\
name: subs
reproduces: {seed: 000_65e83c7f1cb84fd7.txt, scenario: s}
backends: [gbid1]
runtimes:
  - {id: cc1, kind: cluster-controller, republish_received_multicasts: true}
  - {id: app1, kind: libjoynr, cc: cc1}
steps:
  - register: {runtime: app1, provider: counter, domain: d, interface: joynrsim/Counter}
  - register: {runtime: app1, provider: echo, domain: d, interface: joynrsim/Echo}
  - proxy: {runtime: app1, name: px, domain: d, interface: joynrsim/Counter}
  - proxy: {runtime: app1, name: ex, domain: d, interface: joynrsim/Echo}
"""


def load(steps: str):
    return parse_scenario(HEAD + steps, "subs.yaml")


def refused(steps: str, field: str, words: str) -> None:
    with pytest.raises(ScenarioError) as err:
        load(steps)
    assert err.value.field == field and words in err.value.message, str(err.value)


def test_subscription_steps_load_with_their_defaults():
    s = load("""\
  - subscribe: {proxy: px, name: v, attribute: value}
  - subscribe: {proxy: px, name: i, broadcast: incremented, partitions: [a, +, '*'],
                qos: {expiry_ms: 5000}}
  - subscribe: {proxy: px, name: m, broadcast: reachedMultiple, filter: {every: 3},
                qos: {kind: on-change-keep-alive, max_interval_ms: 100, alert_after_ms: 300}}
  - publish: {provider: counter, method: increment, count: 3}
  - expect_publications: {subscription: v, values: [0, 1, 2, 3]}
  - expect_publications: {subscription: i, count: 3, timeout_ms: 500}
  - expect_publications: {subscription: m, at_least: 1}
  - expect_publications: {subscription: m, last: 3}
  - unsubscribe: {subscription: v}
""")
    steps = s.steps[4:]
    assert [st.title for st in steps] == [
        "subscribe v: px to attribute value", "subscribe i: px to broadcast incremented",
        "subscribe m: px to broadcast reachedMultiple", "publish 3x counter.increment",
        "expect publications v: values [0, 1, 2, 3]", "expect publications i: 3",
        "expect publications m: at least 1", "expect publications m: latest 3", "unsubscribe v",
    ]
    v, i, m = (st.args for st in steps[:3])
    assert (v["filter"], thaw(v["partitions"]), thaw(v["qos"]), v["expect_error"]) == (None, [], {}, None)
    assert thaw(i["partitions"]) == ["a", "+", "*"] and i["qos"]["expiry_ms"] == 5000
    assert thaw(m["filter"]) == {"every": 3} and m["qos"]["kind"] == "on-change-keep-alive"
    assert steps[5].args["timeout_ms"] == 500 and steps[4].args["timeout_ms"] == 10_000
    assert s.runtimes[0].republish_received_multicasts is True
    assert s.checks  # expect_publications checks


@pytest.mark.parametrize("steps, field, words", [
    ("  - subscribe: {proxy: px, name: v}\n", "steps[4].subscribe", "give exactly one of attribute, broadcast"),
    ("  - subscribe: {proxy: px, name: v, attribute: value, broadcast: incremented}\n", "steps[4].subscribe",
     "give exactly one of attribute, broadcast"),
    ("  - subscribe: {proxy: nobody, name: v, attribute: value}\n", "steps[4].subscribe.proxy", "no proxy"),
    ("  - subscribe: {proxy: px, name: v, attribute: count}\n", "steps[4].subscribe.attribute",
     "no attribute 'count'; attributes: value"),
    ("  - subscribe: {proxy: ex, name: v, attribute: value}\n", "steps[4].subscribe.attribute", "attributes: none"),
    ("  - subscribe: {proxy: px, name: v, broadcast: fired}\n", "steps[4].subscribe.broadcast",
     "broadcasts: incremented, reachedMultiple"),
    ("  - subscribe: {proxy: px, name: v, attribute: value, filter: {every: 2}}\n", "steps[4].subscribe.filter",
     "no filter"),
    ("  - subscribe: {proxy: px, name: v, broadcast: incremented, filter: {every: 2}}\n",
     "steps[4].subscribe.filter", "not a selective broadcast"),
    ("  - subscribe: {proxy: px, name: v, broadcast: reachedMultiple, partitions: [a]}\n",
     "steps[4].subscribe.partitions", "no partitions"),
    ("  - subscribe: {proxy: px, name: v, broadcast: reachedMultiple, filter: {every: 0}}\n",
     "steps[4].subscribe.filter", "every: an integer from 1"),
    ("  - subscribe: {proxy: px, name: v, broadcast: reachedMultiple, filter: {every: [2]}}\n",
     "steps[4].subscribe.filter.every", "expected"),
    ("  - subscribe: {proxy: px, name: v, broadcast: incremented, partitions: ['*', a]}\n",
     "steps[4].subscribe.partitions", "'*' may only be the last"),
    ("  - subscribe: {proxy: px, name: v, broadcast: incremented, partitions: [a/b]}\n",
     "steps[4].subscribe.partitions[0]", "does not match"),
    ("  - subscribe: {proxy: px, name: v, attribute: value, qos: {kind: periodic}}\n",
     "steps[4].subscribe.qos", "period of at least 1 ms"),
    ("  - subscribe: {proxy: px, name: v, attribute: value, qos: {kind: on-change, alert_after_ms: 5}}\n",
     "steps[4].subscribe.qos", "no interval to miss"),
    ("  - subscribe: {proxy: px, name: v, attribute: value, qos: {expiry_ms: 0}}\n",
     "steps[4].subscribe.qos.expiry_ms", ""),
    ("  - subscribe: {proxy: px, name: v, attribute: value, qos: {when: now}}\n",
     "steps[4].subscribe.qos.when", "unknown key"),
    ("  - subscribe: {proxy: px, name: v, attribute: value}\n  - subscribe: {proxy: px, name: v, attribute: value}\n",
     "steps[5].subscribe.name", "made by an earlier step"),
    ("  - unsubscribe: {subscription: v}\n", "steps[4].unsubscribe.subscription", "no subscription"),
    ("  - expect_publications: {subscription: v, count: 1}\n", "steps[4].expect_publications.subscription",
     "none yet"),
    ("  - subscribe: {proxy: px, name: v, attribute: value}\n  - expect_publications: {subscription: v}\n",
     "steps[5].expect_publications", "give exactly one of count, at_least, last, values"),
    ("  - subscribe: {proxy: px, name: v, attribute: value}\n"
     "  - expect_publications: {subscription: v, count: 1, values: [1]}\n",
     "steps[5].expect_publications", "give exactly one of"),
    ("  - subscribe: {proxy: px, name: v, attribute: value}\n"
     "  - expect_publications: {subscription: v, count: 1, timeout_ms: 600001}\n",
     "steps[5].expect_publications.timeout_ms", "at most 600000"),
    ("  - publish: {provider: nobody, method: increment}\n", "steps[4].publish.provider", "no provider"),
    ("  - publish: {provider: counter, method: echo}\n", "steps[4].publish.method", "no method 'echo'"),
    ("  - publish: {provider: counter, method: increment, count: 0}\n", "steps[4].publish.count", ""),
])
def test_bad_subscription_steps_are_refused(steps, field, words):
    refused(steps, field, words)


class _Runner(SubscriptionSteps):
    def __init__(self, subscription) -> None:
        self.subscriptions = {"s": (SimpleNamespace(provider_participant_id="p"), subscription)}

    async def _context(self, participant_id: str) -> str:
        return f"context of {participant_id}"


def _args(**kw):
    return {"subscription": "s", "count": None, "at_least": None, "values": None, "last": None,
            "timeout_ms": 50, **kw}


async def test_expect_publications_judges_what_arrived():
    sub = Subscription("s", "px", "p", "value", "attribute", SubscriptionQos("on-change"))
    runner = _Runner(sub)
    for value in (0, 1, 2):
        sub._add(value)
    await runner._step_expect_publications(_args(values=[0, 1, 2]))
    await runner._step_expect_publications(_args(count=3))
    await runner._step_expect_publications(_args(at_least=2))
    await runner._step_expect_publications(_args(last=2))
    with pytest.raises(StepFailed, match=r"received \[0, 1, 2\], expected \[0, 2, 1\]"):
        await runner._step_expect_publications(_args(values=[0, 2, 1]))
    with pytest.raises(StepFailed, match="3 publications, expected 2"):
        await runner._step_expect_publications(_args(count=2))
    with pytest.raises(StepFailed, match="3 of 4 publications within 50 ms") as err:
        await runner._step_expect_publications(_args(count=4))
    assert err.value.context == "context of p"
    with pytest.raises(StepFailed, match="latest value \\[2\\], expected 7"):
        await runner._step_expect_publications(_args(last=7))
    # a value that arrives while the step waits is seen
    asyncio.get_running_loop().call_soon(sub._add, 7)
    await runner._step_expect_publications(_args(last=7, timeout_ms=5000))
