"""The round schedule shared by every round loop: what happens between rounds.

Before a round: the injected failure of --fail-at, if this is its round. After a round: the
progress bar, and a checkpoint every so many rounds. The loops themselves only hold the math
and the messages of one round.
"""
from __future__ import annotations


def rounds(first_round: int, last_round: int, progress, fault=None, checkpoint=None):
    """Yield round indices ``first_round..last_round-1`` with the between-round work done.

    Parameters
    ----------
    progress : Progress
    fault : Fault, optional
        Where this rank fails on purpose (--fail-at).
    checkpoint : (int, callable), optional
        ``(every, save)``: ``save(t)`` after every ``every``-th round but the last, on every rank.
    """
    ckpt_every, save = checkpoint if checkpoint else (0, None)
    fail_at = fault.at if fault is not None else -1
    for t in range(first_round, last_round):
        if t == fail_at:
            fault.trigger(t)
        yield t
        progress.update(t + 1)
        if ckpt_every and (t + 1) % ckpt_every == 0 and t + 1 < last_round:
            save(t + 1)
    progress.close()
