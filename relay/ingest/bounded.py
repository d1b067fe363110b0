"""The receiver's bounded memories: spans seen (de-duplication) and recent keys."""

from __future__ import annotations

from collections import OrderedDict


class Seen:
    """A bounded set: two generations, the older dropped when the newer fills."""

    def __init__(self, capacity: int) -> None:
        self.half = max(1, capacity // 2)
        self.new: set[str] = set()
        self.old: set[str] = set()

    def __contains__(self, key: str) -> bool:
        return key in self.new or key in self.old

    def add(self, key: str) -> None:
        self.new.add(key)
        if len(self.new) >= self.half:
            self.old = self.new
            self.new = set()

    def __len__(self) -> int:
        return len(self.new) + len(self.old)


def bounded_add(items: OrderedDict[str, None], key: str, limit: int) -> None:
    items[key] = None
    items.move_to_end(key)
    while len(items) > limit:
        items.popitem(last=False)
