"""A bounded memory of what a router has seen: duplicate detection that cannot grow without end."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable


class BoundedMemory:
    """A set that forgets the oldest first once it holds ``size`` items."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"size: at least 1, got {size}")
        self._size = size
        self._items: OrderedDict[Hashable, None] = OrderedDict()

    def add(self, item: Hashable) -> bool:
        """False when the item was remembered already."""
        if item in self._items:
            return False
        self._items[item] = None
        if len(self._items) > self._size:
            self._items.popitem(last=False)
        return True

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()
