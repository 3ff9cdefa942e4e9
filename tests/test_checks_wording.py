"""An overwrite violation names the run's policy (what replaced or refused) apart from the
seed's verdict (the rule table it is judged by)."""

from __future__ import annotations

from analytics_helpers import RunBuilder, check, entry


def test_a_violation_names_the_runs_policy_and_the_seeds_verdict(spark, tmp_path):
    wsc, mqtt = entry("WebSocketClient", "lib-1"), entry("Mqtt", "g1/cc-2")
    naive = RunBuilder("lww", policy="last-writer-wins")  # no seed table: judged as precedence
    naive.put("cc-1", 10, "a", wsc, mqtt, "replaced")
    strict = RunBuilder("pre")
    strict.put("cc-1", 10, "b", mqtt, wsc, "refused")  # precedence accepts WSC over Mqtt
    result = check(spark, tmp_path, [naive, strict], "overwrite-violation")
    by_run = {v.run: v.summary for v in result.violations}
    assert by_run["lww"] == ("cc-1 rt.put a: WebSocketClient -> Mqtt replaced under last-writer-wins; "
                             "the seed (precedence) refuses this put (should-refuse:precedence)")
    assert by_run["pre"] == ("cc-1 rt.put b: Mqtt -> WebSocketClient refused under precedence; "
                             "the seed (precedence) accepts this put (should-accept:precedence)")
