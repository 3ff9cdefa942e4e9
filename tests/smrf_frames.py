"""SMRF frames for property tests: any fields SMRF can carry, and a frame as it comes back
(its headers in the sorted order joynr's serialisers write)."""

from __future__ import annotations

from hypothesis import strategies as st

from joynr_sim.wire.smrf import SmrfFrame

texts = st.text(max_size=40)
frames = st.builds(
    SmrfFrame, recipient=texts, sender=texts, ttl_ms=st.integers(-(2**63), 2**63 - 1), ttl_absolute=st.booleans(),
    headers=st.dictionaries(texts, texts, max_size=8).map(lambda d: tuple(d.items())),
    body=st.binary(max_size=300), compressed=st.booleans(), signature=st.none() | st.binary(max_size=40),
)


def sorted_headers(frame: SmrfFrame) -> SmrfFrame:
    """The frame as it comes back: headers in the sorted order joynr's serialisers write."""
    return SmrfFrame(**{**frame.__dict__, "headers": tuple(sorted(frame.headers, key=lambda kv: kv[0].encode()))})
