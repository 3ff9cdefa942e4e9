"""Variants of the routing table's rules (seeds 000, 002, 003) that no policy breaks:
(name, seed sentence, behaviour); see ``core.variants``. ``apply`` wraps a policy with one."""

from __future__ import annotations

from .policies import Policy

ROUTING_VARIANTS: tuple[tuple[str, str, str], ...] = ()


def apply(policy: Policy, variant: str) -> Policy:
    """``policy`` with the routing variant ``variant`` applied."""
    raise ValueError(f"no routing variant {variant!r}")
