"""Variants of the link registry's rules (seed 004): (name, seed sentence, behaviour); see
``core.variants``."""

from __future__ import annotations

LINK_VARIANTS: tuple[tuple[str, str, str], ...] = ()
