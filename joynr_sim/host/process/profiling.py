"""A cProfile of a host process, switched on and off by the runner (control op ``profile``).

The fleet benchmark profiles its hosts over part of the load to show where a call's CPU goes
where it is spent: in the hosts, under many calls at once, not in a lone call in the
runner's process. Thread CPU time, so waiting on sockets counts for nothing. The answer is
the top functions by own time, with their calls, so the runner can add up several hosts.
"""

from __future__ import annotations

import cProfile
import pstats
import time
from pathlib import Path
from typing import Any

TOP_N = 30


class HostProfiler:
    def __init__(self) -> None:
        self._profile: cProfile.Profile | None = None

    def switch(self, enable: bool) -> dict[str, Any] | None:
        """On: None. Off: what was profiled since it went on. Twice the same way is an error:
        a second "on" would drop what the first collected; an "off" first has nothing."""
        if enable:
            if self._profile is not None:
                raise ValueError("profile: already on")
            self._profile = cProfile.Profile(time.thread_time)
            self._profile.enable()
            return None
        if self._profile is None:
            raise ValueError("profile: not on")
        profile, self._profile = self._profile, None
        profile.disable()
        return summary(pstats.Stats(profile))


def summary(stats: pstats.Stats) -> dict[str, Any]:
    entries = stats.stats.items()  # type: ignore[attr-defined]
    top = sorted(entries, key=lambda kv: kv[1][2], reverse=True)[:TOP_N]
    return {
        "own_s": sum(tt for (_, _, tt, _, _) in stats.stats.values()),  # type: ignore[attr-defined]
        "function_calls": sum(nc for (_, nc, _, _, _) in stats.stats.values()),  # type: ignore[attr-defined]
        "top": [{"function": f"{func} ({Path(filename).name}:{line})" if line else f"{func} ({filename})",
                 "own_s": tt, "calls": nc} for (filename, line, func), (_, nc, tt, _, _) in top],
    }
