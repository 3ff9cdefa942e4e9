"""Variants of the GCD's rules (seed 001): (name, seed sentence, behaviour); see ``core.variants``."""

from __future__ import annotations

GCD_VARIANTS: tuple[tuple[str, str, str], ...] = ()
