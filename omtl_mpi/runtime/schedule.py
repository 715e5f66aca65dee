"""The round schedule shared by every round loop: what happens between rounds.

Before a round: the injected failure of --fail-at, if this is its round. After a round: the
progress bar, the check that the model is still finite, and a checkpoint every so many rounds.
The loops themselves only hold the math and the messages of one round; the between-round work
is one :class:`Hooks` object that only :func:`rounds` reads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

# A model that goes non-finite is found within this many rounds (and always before a checkpoint
# or the results are written): often enough to name the round, rarely enough to cost nothing
CHECK_EVERY = 100


@dataclass
class Hooks:
    """The between-round work of a run.

    Attributes
    ----------
    progress : Progress, optional
        Updated after every round, closed after the last.
    fault : Fault, optional
        Where this rank fails on purpose (--fail-at).
    checkpoint : (int, callable), optional
        ``(every, save)``: ``save(t)`` after every ``every``-th round but the last, on every rank.
    check : callable, optional
        ``check(t)`` after every :data:`CHECK_EVERY`-th round, before every checkpoint and after
        the last round, on every rank (collective): raises when the model is not finite.
    """

    progress: object = None
    fault: object = None
    checkpoint: tuple | None = None
    check: Callable[[int], None] | None = None


NO_HOOKS = Hooks()


def rounds(first_round: int, last_round: int, hooks: Hooks = NO_HOOKS):
    """Yield round indices ``first_round..last_round-1`` with the between-round work done."""
    ckpt_every, save = hooks.checkpoint if hooks.checkpoint else (0, None)
    fail_at = hooks.fault.at if hooks.fault is not None else -1
    progress, check = hooks.progress, hooks.check
    for t in range(first_round, last_round):
        if t == fail_at:
            hooks.fault.trigger(t)
        yield t
        done = t + 1
        if progress is not None:
            progress.update(done)
        saving = ckpt_every and done % ckpt_every == 0 and done < last_round
        if check is not None and (saving or done % CHECK_EVERY == 0 or done == last_round):
            check(done)
        if saving:
            save(done)
    if progress is not None:
        progress.close()
