"""A one-line progress bar, shown by one rank only, at most a few times a second."""
from __future__ import annotations

import sys
from time import perf_counter


class Progress:
    """Progress of a run of ``total`` rounds on stderr; a no-op when disabled.

    stderr is looked up at each write, so a caller that redirects it (a measurement that
    discards the line) needs nothing more.
    """

    def __init__(self, total: int, enabled: bool):
        self.total = max(total, 1)
        self.enabled = enabled
        self._t0 = perf_counter()
        self._next = 0.0

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = perf_counter() - self._t0
        if now < self._next and done < self.total:
            return
        self._next = now + 0.25
        frac = done / self.total
        bar = "#" * int(30 * frac)
        eta = now / frac - now if frac > 0 else 0.0
        sys.stderr.write(f"\r[{bar:<30}] {done}/{self.total} rounds  "
                         f"{now:6.1f}s elapsed, ~{eta:5.1f}s left ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            self.update(self.total)
            sys.stderr.write("\n")
            sys.stderr.flush()
