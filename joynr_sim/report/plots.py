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
ENTRY_TYPES = ["InProcess", "WebSocket", "WebSocketClient", "Mqtt", "Channel"]
OUTCOMES = {"created": "#2e7d32", "replaced": "#1565c0", "merged": "#8d8d8d", "refused": "#c62828",
            "removed": "#ef6c00", "refused-sticky": "#c62828", "absent": "#bdbdbd"}
WIDTH = 760
COUNT_AXIS = alt.Axis(tickMinStep=1, format="d")  # counts: no ticks between whole numbers


def _spec(chart: alt.TopLevelMixin) -> Spec:
    return chart.to_dict()


def activity(series: dict[str, list[dict[str, Any]]], runtimes: list[str]) -> Spec | None:
    """Events and messages sent over time, stacked per runtime."""
    if not series["events"]:
        return None
    color = alt.Color("rt:N", title="runtime", scale=alt.Scale(domain=runtimes), sort=runtimes)
    end = max(r["t1"] for r in series["events"])

    def bars(rows: list[dict[str, Any]], title: str) -> alt.Chart:
        return alt.Chart(alt.Data(values=rows), title=title).mark_bar().encode(
            x=alt.X("t0:Q", title=TIME, scale=alt.Scale(domain=[0, end], nice=False)), x2="t1:Q",
            y=alt.Y("sum(n):Q", title="count", axis=COUNT_AXIS), color=color,
            tooltip=[alt.Tooltip("rt:N", title="runtime"), alt.Tooltip("t0:Q", title="from ms"),
                     alt.Tooltip("t1:Q", title="to ms"), alt.Tooltip("sum(n):Q", title="count")],
        ).properties(width=WIDTH, height=140)

    charts = [bars(series["events"], "trace events per runtime")]
    if series["sent"]:
        charts.append(bars(series["sent"], "messages sent (msg.out) per runtime"))
    return _spec(alt.vconcat(*charts).resolve_scale(x="shared"))


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
    ).properties(width=WIDTH, height=alt.Step(22)))


def links(rows: list[dict[str, Any]], runtimes: list[str]) -> Spec | None:
    if not rows:
        return None
    return _spec(alt.Chart(alt.Data(values=rows), title="broker sessions: attaches, steals, detaches").mark_point(
        filled=True, size=90, opacity=0.85).encode(
        x=alt.X("t:Q", title=TIME), y=alt.Y("rt:N", title=None, sort=runtimes),
        color=alt.Color("what:N", title="link event"), shape=alt.Shape("what:N", title="link event"),
        tooltip=[alt.Tooltip("t:Q", title="ms"), alt.Tooltip("rt:N", title="runtime"),
                 alt.Tooltip("what:N", title="event"), alt.Tooltip("session:N"), alt.Tooltip("detail:N")],
    ).properties(width=WIDTH, height=alt.Step(30)))


def routing_timeline(data: dict[str, Any], runtimes: list[str]) -> Spec | None:
    """Every runtime's entry for one participant over time; the page picks the participant
    by setting the ``participant`` signal."""
    if not data["participants"]:
        return None
    chosen = alt.param(name="participant", value=data["first"])
    mine = alt.datum.p == chosen
    y = alt.Y("rt:N", title=None, sort=runtimes)
    bars = alt.Chart(alt.Data(values=data["entries"])).transform_filter(mine).mark_bar(opacity=0.75).encode(
        x=alt.X("t0:Q", title=TIME, scale=alt.Scale(domain=[0, max(1, data["end"])])), x2="t1:Q", y=y,
        color=alt.Color("type:N", title="entry held", scale=alt.Scale(domain=ENTRY_TYPES)),
        tooltip=[alt.Tooltip("rt:N", title="runtime"), alt.Tooltip("type:N"), alt.Tooltip("addr:N", title="address"),
                 alt.Tooltip("sticky:N"), alt.Tooltip("visible:N", title="globally visible"),
                 alt.Tooltip("expiry:N"), alt.Tooltip("t0:Q", title="from ms"), alt.Tooltip("t1:Q", title="to ms")],
    )
    points = alt.Chart(alt.Data(values=data["changes"])).transform_filter(mine).mark_point(
        filled=True, size=110, stroke="black", strokeWidth=0.6).encode(
        x="t:Q", y=y, shape=alt.Shape("op:N", title="change", scale=alt.Scale(
            domain=["put", "remove", "purge"], range=["circle", "square", "triangle-down"])),
        color=alt.Color("outcome:N", title="outcome", scale=alt.Scale(domain=list(OUTCOMES),
                                                                      range=list(OUTCOMES.values()))),
        tooltip=[alt.Tooltip("t:Q", title="ms"), alt.Tooltip("rt:N", title="runtime"),
                 alt.Tooltip("mark:N", title="change"), alt.Tooltip("reason:N"), alt.Tooltip("origin:N"),
                 alt.Tooltip("old:N", title="before"),
                 alt.Tooltip("offered:N"), alt.Tooltip("held:N", title="held after")],
    )
    refused = alt.Chart(alt.Data(values=data["changes"])).transform_filter(mine & alt.datum.refused).mark_text(
        text="✗", color="#c62828", fontSize=18, fontWeight="bold", dy=-14).encode(x="t:Q", y=y)
    chart = alt.layer(bars, points, refused).add_params(chosen).resolve_scale(color="independent")
    return _spec(chart.properties(width=WIDTH, height=alt.Step(34)))


@cache
def vega_script() -> str:
    """vega, vega-lite and vega-embed in one classic script, for the Vega-Lite version this
    Altair writes; built by vl-convert from the copies in its own wheel (a few seconds, once)."""
    import vl_convert

    version = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    script = vl_convert.javascript_bundle(vl_version=version)
    # inlined into <script>: a closing tag inside a JS string must not end the element
    return script.replace("</script", "<\\/script")
