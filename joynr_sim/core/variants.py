"""Named variants beside the routing policies: the historic or naive behaviours of one part
of joynr (the routing table, the GCD, the link registry) that a seed rules out.

A policy decides the routing table of every runtime; a variant changes one part and keeps
the rest of the scenario's own rule set. A run's rule set is named ``<policy>`` or
``<policy>+<variant>`` (``precedence+gcd:ignores-gbids``). That one string travels wherever
the policy name went, into host processes too, and each part reads the variant it owns
with ``variant_of``. A scenario guards against a variant by its name as it guards against a
policy; the matrix replays the library under every policy and every variant.

The variants themselves are defined next to the rules they break
(``core.routing_variants``, ``core.gcd_variants``, ``core.links.variants``); this module
is their one registry.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gcd_variants import GCD_VARIANTS
from .links.variants import LINK_VARIANTS
from .policies import POLICIES
from .routing_variants import ROUTING_VARIANTS

PARTS = ("routing", "gcd", "links")
SEPARATOR = "+"


@dataclass(frozen=True)
class Variant:
    name: str  # "<part>:<behaviour>", e.g. "gcd:ignores-gbids"
    seed: str  # the seed file and the sentence the variant breaks
    summary: str  # the behaviour, as an engineer of that part would recognise it

    @property
    def part(self) -> str:
        return self.name.split(":", 1)[0]


VARIANTS: dict[str, Variant] = {
    name: Variant(name, seed, summary)
    for name, seed, summary in (*ROUTING_VARIANTS, *GCD_VARIANTS, *LINK_VARIANTS)
}
VARIANT_NAMES: tuple[str, ...] = tuple(VARIANTS)
# What a scenario may guard against and a matrix has a column for: the policies, then the variants.
RULE_SET_NAMES: tuple[str, ...] = (*POLICIES, *VARIANT_NAMES)

for _v in VARIANTS.values():  # a misnamed variant is a programming error: stop at import
    if _v.part not in PARTS or not _v.name.split(":", 1)[1]:
        raise AssertionError(f"variant {_v.name!r}: expected '<part>:<behaviour>' with a part of {PARTS}")


def rule_set(policy: str, column: str | None = None) -> str:
    """The rule set a run under ``column`` (a policy or a variant name) uses for a scenario
    whose own policy is ``policy``: a variant keeps the scenario's policy."""
    if column is None or column in POLICIES:
        return column or policy
    if column in VARIANTS:
        return f"{policy}{SEPARATOR}{column}"
    raise ValueError(f"unknown policy or variant {column!r}; choose one of {', '.join(RULE_SET_NAMES)}")


def parse_rule_set(name: object) -> tuple[str, Variant | None]:
    """``precedence`` or ``precedence+gcd:ignores-gbids`` -> (policy, variant); ValueError
    naming the known ones for anything else."""
    if not isinstance(name, str):
        raise ValueError(f"policy: expected a policy name ({', '.join(POLICIES)}), got {type(name).__name__}")
    policy, sep, variant = name.partition(SEPARATOR)
    if policy not in POLICIES:
        raise ValueError(f"policy: unknown routing policy {policy!r}; choose one of {', '.join(POLICIES)}")
    if not sep:
        return policy, None
    if variant not in VARIANTS:
        raise ValueError(f"policy: unknown variant {variant!r} in {name!r}; choose one of "
                         f"{', '.join(VARIANT_NAMES) or '(none defined)'}")
    return policy, VARIANTS[variant]


def variant_of(rules: object, part: str) -> str | None:
    """The name of the variant of ``part`` in the rule set ``rules``, or None (the seed's rules).
    A Policy object (not a name) carries no variant."""
    if not isinstance(rules, str) or SEPARATOR not in rules:
        return None
    _, variant = parse_rule_set(rules)
    return variant.name if variant is not None and variant.part == part else None
