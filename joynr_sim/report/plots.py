"""The plots of a run, as Vega-Lite specifications built with Altair; the page draws them
with vega-embed (shipped by vl-convert, inlined in the page, so nothing is fetched).

Each function returns a spec, or None when there is nothing to draw (an empty chart only
prints warnings in the browser's console).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import altair as alt

Spec = dict[str, Any]

TIME = "ms since the run started"
# Address types and outcomes are told apart by colour: the types in cool, pale tones (the
# bars), the outcomes in strong, warm or dark ones (the points), no colour shared.
ENTRY_TYPES = {"InProcess": "#b39ddb", "WebSocket": "#64b5f6", "WebSocketClient": "#80cbc4", "Mqtt": "#bcaaa4",
               "Channel": "#b0bec5"}
OUTCOMES = {"created": "#2e7d32", "replaced": "#e65100", "merged": "#424242", "refused": "#c62828",
            "removed": "#ad1457", "refused-sticky": "#8e0000", "absent": "#000000"}
STEP_COLOUR, FAULT_COLOUR, VIOLATION_COLOUR = "#757575", "#d50000", "#d50000"
WIDTH = "container"  # as wide as the page: a plot never makes a narrow window scroll sideways
COUNT_AXIS = alt.Axis(tickMinStep=1, format="d")  # counts: no ticks between whole numbers
LEGENDS_HEIGHT = 340  # the timeline's four legends, one under the other
TIME_AXIS = alt.Axis(format="d", labelOverlap=True, labelFlush=True, tickCount=8)


def _spec(chart: alt.TopLevelMixin) -> Spec:
    spec = chart.to_dict()
    # as wide as the page, as tall as the spec says (a height per lane stays as it is)
    spec["autosize"] = {"type": "fit-x", "contains": "padding"}
    return spec


def activity(series: dict[str, list[dict[str, Any]]], runtimes: list[str], which: str = "events") -> Spec | None:
    """Events (``which`` "events") or messages sent ("sent") over time, stacked per runtime."""
    rows = series[which]
    if not rows:
        return None
    color = alt.Color("rt:N", title="runtime", scale=alt.Scale(domain=runtimes), sort=runtimes)
    end = max(r["t1"] for r in series["events"])
    title = "trace events per runtime" if which == "events" else "messages sent (msg.out) per runtime"
    return _spec(alt.Chart(alt.Data(values=rows), title=title).mark_bar().encode(
        x=alt.X("t0:Q", title=TIME, scale=alt.Scale(domain=[0, end], nice=False)), x2="t1:Q",
        y=alt.Y("sum(n):Q", title="count", axis=COUNT_AXIS), color=color,
        tooltip=[alt.Tooltip("rt:N", title="runtime"), alt.Tooltip("t0:Q", title="from ms"),
                 alt.Tooltip("t1:Q", title="to ms"), alt.Tooltip("sum(n):Q", title="count")],
    ).properties(width=WIDTH, height=140))


def latency(rows: list[dict[str, Any]]) -> Spec | None:
    if not rows:
        return None
    return _spec(alt.Chart(alt.Data(values=rows), title="request → reply latency").mark_bar().encode(
        x=alt.X("ms:Q", bin=alt.Bin(maxbins=40), title="ms from the request sent to its reply delivered"),
        y=alt.Y("count():Q", title="requests", axis=COUNT_AXIS),
        tooltip=[alt.Tooltip("ms:Q", bin=alt.Bin(maxbins=40), title="ms"), alt.Tooltip("count():Q", title="requests")],
    ).properties(width=WIDTH, height=160))


def drops(rows: list[dict[str, Any]], runtimes: list[str]) -> Spec | None:
    if not rows:
        return None
    return _spec(alt.Chart(alt.Data(values=rows), title="dropped messages by reason").mark_bar().encode(
        y=alt.Y("reason:N", title=None, sort="-x"), x=alt.X("sum(n):Q", title="drops", axis=COUNT_AXIS),
        color=alt.Color("rt:N", title="runtime", scale=alt.Scale(domain=runtimes)),
        tooltip=[alt.Tooltip("reason:N"), alt.Tooltip("rt:N", title="runtime"), alt.Tooltip("sum(n):Q", title="drops")],
    ).properties(width=WIDTH, height=22 * len({r["reason"] for r in rows})))


def links(rows: list[dict[str, Any]], runtimes: list[str]) -> Spec | None:
    if not rows:
        return None
    return _spec(alt.Chart(alt.Data(values=rows), title="broker sessions: attaches, steals, detaches").mark_point(
        filled=True, size=90, opacity=0.85).encode(
        x=alt.X("t:Q", title=TIME), y=alt.Y("rt:N", title=None, sort=runtimes),
        color=alt.Color("what:N", title="link event"), shape=alt.Shape("what:N", title="link event"),
        tooltip=[alt.Tooltip("t:Q", title="ms"), alt.Tooltip("rt:N", title="runtime"),
                 alt.Tooltip("what:N", title="event"), alt.Tooltip("session:N"), alt.Tooltip("detail:N")],
    ).properties(width=WIDTH, height=30 * len({r["rt"] for r in rows})))


def routing_timeline(data: dict[str, Any], runtimes: list[str]) -> Spec | None:
    """Every runtime's entry for one participant over time; the page picks the participant
    by setting the ``participant`` signal, and the time axis follows it (``zooms``)."""
    if not data["participants"]:
        return None
    chosen = alt.param(name="participant", value=data["first"])
    zooms = alt.param(name="zooms", value=data["zooms"])
    mine = alt.datum.p == chosen
    x_scale = alt.Scale(domain={"expr": f"zooms[participant] || [0, {max(1, data['end'])}]"}, nice=False)
    y = alt.Y("rt:N", title=None, sort=runtimes)
    bars = alt.Chart(alt.Data(values=data["entries"])).transform_filter(mine).mark_bar(opacity=0.85, clip=True).encode(
        x=alt.X("t0:Q", title=TIME, scale=x_scale, axis=TIME_AXIS), x2="t1:Q", y=y,
        color=alt.Color("type:N", title="entry held", scale=alt.Scale(domain=list(ENTRY_TYPES),
                                                                      range=list(ENTRY_TYPES.values()))),
        tooltip=[alt.Tooltip("rt:N", title="runtime"), alt.Tooltip("type:N"), alt.Tooltip("addr:N", title="address"),
                 alt.Tooltip("sticky:N"), alt.Tooltip("visible:N", title="globally visible"),
                 alt.Tooltip("expiry:N"), alt.Tooltip("t0:Q", title="from ms"), alt.Tooltip("t1:Q", title="to ms")],
    )
    changes = alt.Data(values=data["changes"])
    points = alt.Chart(changes).transform_filter(mine).mark_point(
        filled=True, size=110, stroke="black", strokeWidth=0.6, clip=True).encode(
        x="t:Q", y=y, shape=alt.Shape("op:N", title="change", scale=alt.Scale(
            domain=["put", "remove", "purge"], range=["circle", "square", "triangle-down"])),
        color=alt.Color("outcome:N", title="outcome", scale=alt.Scale(domain=list(OUTCOMES),
                                                                      range=list(OUTCOMES.values()))),
        tooltip=[alt.Tooltip("t:Q", title="ms"), alt.Tooltip("rt:N", title="runtime"),
                 alt.Tooltip("mark:N", title="change"), alt.Tooltip("reason:N"), alt.Tooltip("origin:N"),
                 alt.Tooltip("old:N", title="before"),
                 alt.Tooltip("offered:N"), alt.Tooltip("held:N", title="held after")],
    )
    refused = alt.Chart(changes).transform_filter(mine & alt.datum.refused).mark_text(
        text="✗", color="#c62828", fontSize=18, fontWeight="bold", dy=-14, clip=True).encode(x="t:Q", y=y)
    # the change a violation refers to: a ring around its point, and its own name in the legend's place
    ring = alt.Chart(changes).transform_filter(mine & alt.datum.violating).mark_point(
        shape="circle", size=520, filled=False, stroke=VIOLATION_COLOUR, strokeWidth=3, clip=True,
    ).encode(x="t:Q", y=y, tooltip=[alt.Tooltip("mark:N", title="violating change"), alt.Tooltip("t:Q", title="ms"),
                                    alt.Tooltip("rt:N", title="runtime")])
    layers = [bars, points, refused, ring]
    if data["marks"]:
        when = alt.Data(values=data["marks"])
        tip = [alt.Tooltip("text:N", title="what"), alt.Tooltip("t:Q", title="ms")]
        rule_colour = alt.Color("kind:N", title="on the time axis", scale=alt.Scale(
            domain=["step", "fault"], range=[STEP_COLOUR, FAULT_COLOUR]))
        layers.append(alt.Chart(when).mark_rule(strokeDash=[4, 3], clip=True).encode(
            x="t:Q", color=rule_colour, size=alt.condition(alt.datum.kind == "fault", alt.value(2), alt.value(1)),
            tooltip=tip))
        # named on the axis: the faults and a failed step; a step's line tells its title on hover
        named = alt.Chart(when).transform_filter((alt.datum.kind == "fault") | alt.datum.failed)
        label = named.mark_text(align="left", baseline="top", dx=2, dy=2, fontSize=10, clip=True)
        layers.append(label.encode(
            x="t:Q", y=alt.value(0), text="short:N", color=rule_colour.legend(None), tooltip=tip))
    chart = alt.layer(*layers).add_params(chosen, zooms).resolve_scale(color="independent")
    # a height per lane, given as a number: fitting the width to the page takes a fixed height
    return _spec(chart.properties(width=WIDTH, height=max(34 * len(runtimes), LEGENDS_HEIGHT)))


@cache
def vega_script() -> str:
    """vega, vega-lite and vega-embed in one classic script, for the Vega-Lite version this
    Altair writes; built by vl-convert from the copies in its own wheel (a few seconds, once)."""
    import vl_convert

    version = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    script = vl_convert.javascript_bundle(vl_version=version)
    # inlined into <script>: a closing tag inside a JS string must not end the element
    return script.replace("</script", "<\\/script")
