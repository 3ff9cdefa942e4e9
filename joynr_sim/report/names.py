"""How the report shows a participant: by the scenario's name for it
(``joynr_sim.participant_names``), its id beside."""

from __future__ import annotations

from typing import Any

from ..participant_names import Named
from ..participant_names import scenario_names as participant_names

__all__ = ["Named", "described", "label", "participant_names"]


def label(names: dict[str, Named], participant: Any) -> str:
    """A participant as the page shows it: its scenario name, else its id."""
    text = str(participant)
    named = names.get(text)
    return named.name if named is not None else text


def described(names: dict[str, Named], participant: str) -> str:
    """``px (proxy on consumer, 4f2c…)``: what the scenario calls it, and its id."""
    named = names.get(participant)
    if named is None:
        return participant
    return f"{named.name} ({named.role} on {named.runtime}, {participant})"
