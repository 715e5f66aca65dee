"""What happens between rounds, for every round loop: before a round, the injected failure of
--fail-at; after it, the progress bar, the finiteness check and a checkpoint every so many
rounds. The loops hold only one round's math and messages; :func:`rounds` does the rest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

# A model that goes non-finite is found within this many rounds (and always before a checkpoint
# or the results are written): often enough to name the round, rarely enough to cost nothing
CHECK_EVERY = 100


@dataclass(frozen=True)
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
    delay : Delay, optional
        This rank's injected slowness (--slow, --delays: :mod:`.stragglers`): the loops call
        ``delay.after(t, seconds)`` with the round's work, before they send.
    """

    progress: object = None
    fault: object = None
    checkpoint: tuple | None = None
    check: Callable[[int], None] | None = None
    delay: object = None


NO_HOOKS = Hooks()


def _next_event(done: int, last_round: int, every: int, check: bool) -> int:
    """The first round count after ``done`` at which a check or a checkpoint is due (past the
    last round: none), so that a round costs one comparison, not several remainders."""
    due = [last_round, (done // CHECK_EVERY + 1) * CHECK_EVERY] if check else []
    if every:
        due.append((done // every + 1) * every)
    return min(due) if due else last_round + 1


def rounds(first_round: int, last_round: int, hooks: Hooks = NO_HOOKS):
    """Yield round indices ``first_round..last_round-1`` with the between-round work done."""
    every, save = hooks.checkpoint if hooks.checkpoint else (0, None)
    fail_at = hooks.fault.at if hooks.fault is not None else -1
    progress, check = hooks.progress, hooks.check
    update = progress.update if progress is not None else None
    event = _next_event(first_round, last_round, every, check is not None)
    for t in range(first_round, last_round):
        if t == fail_at:
            hooks.fault.trigger(t)
        yield t
        if update is not None:
            update(t + 1)
        if t + 1 == event:
            done = t + 1
            if check is not None:
                check(done)
            if every and done % every == 0 and done < last_round:
                save(done)
            event = _next_event(done, last_round, every, check is not None)
    if progress is not None:
        progress.close()
