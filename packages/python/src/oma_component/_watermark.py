"""The watermark of a queue whose entries settle out of order (workers finish in any order):
the highest entry id up to which every entry has settled, which a flush waits for. The trace
sinks' batching queue and the online evaluator's queue both keep one."""

from __future__ import annotations

from typing import Set


class Watermark:
    """``through``: every entry with an id up to it has settled (ids start at 1)."""

    __slots__ = ("through", "_ahead")

    def __init__(self) -> None:
        self.through = 0
        self._ahead: Set[int] = set()

    def settle(self, entry_id: int) -> None:
        """Marks ``entry_id`` settled; ``through`` moves past it and every settled id after it."""
        if entry_id == self.through + 1:
            self.through = entry_id
            while self.through + 1 in self._ahead:
                self._ahead.discard(self.through + 1)
                self.through += 1
        elif entry_id > self.through:
            self._ahead.add(entry_id)
