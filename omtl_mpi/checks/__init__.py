"""The generic checks every learner passes, in the manner of river's ``check_estimator`` and
scikit-learn's (whose own suites run on the learners too: river's on every learner with a
``task_key``, scikit-learn's on :class:`omtl_mpi.sklearn.MultiTaskClassifier`, in the project's
tests): named checks, each run on a fresh clone of the learner given.

:func:`check_learner` runs them all and raises AssertionError naming the check that failed;
:func:`learner_checks` lists them, and :func:`parametrize_with_checks` turns them into one
pytest case per learner and check. A learner may skip checks by name: a class attribute
``check_skips`` of the learner's class, or ``CHECK_SKIPS`` of its role class (a set of names,
each skip explained in a comment beside it), or ``skip=`` here.

What is checked, one check each (listed in docs/DESIGN.md, *Adding a learner*): a fresh
learner predicts; the same inputs give the same bits; nothing changes its inputs; predicting
changes nothing; every task is its own; state round trips and copies continue bit for bit; the
rounds of learn_one and partial_fit; one process equals MPI.

The checks are in modules by what they cover (:mod:`.purity`, :mod:`.tasks`, :mod:`.rounds`,
:mod:`.mpi`); :mod:`.common` is what they share.
"""
import os
import re

import numpy as np

from .common import _learn, _learner, _needed, _same_state, _Skip, _streams  # noqa: F401
from .mpi import check_one_process_equals_mpi
from .purity import (check_bad_input_changes_nothing, check_deterministic, check_inputs_not_mutated,
                     check_predict_before_learning, check_predict_changes_nothing,
                     check_predicting_changes_no_attribute)
from .rounds import (check_copies_continue, check_decision_is_the_rounds_prediction,
                     check_learn_one_is_a_round, check_mini_batches, check_partial_fit_is_rounds,
                     check_state_round_trip)
from .tasks import check_a_task_alone_decides_as_beside_others, check_learning_a_task_leaves_the_others

CHECKS = (check_predict_before_learning, check_deterministic, check_inputs_not_mutated,
          check_predict_changes_nothing, check_predicting_changes_no_attribute,
          check_a_task_alone_decides_as_beside_others, check_learning_a_task_leaves_the_others,
          check_decision_is_the_rounds_prediction,
          check_state_round_trip, check_copies_continue, check_learn_one_is_a_round,
          check_partial_fit_is_rounds, check_mini_batches, check_bad_input_changes_nothing,
          check_one_process_equals_mpi)


def learner_checks(obj, skip=()) -> list:
    """The checks that apply to a learner: ``(name, check)`` pairs, ``check()`` (or
    ``check(learner)``, as scikit-learn's) running the named check on a fresh clone of it."""
    m = _learner(obj)
    skips = set(skip) | set(getattr(type(m), "check_skips", ()))
    unknown = skips - {c.__name__ for c in CHECKS}
    if unknown:
        raise ValueError(f"no such check: {', '.join(sorted(unknown))}")

    def bound(check):
        def run(learner=None):
            clone = (m if learner is None else learner).clone()
            _watch_decisions(clone)
            try:
                check(clone)
            except _Skip:
                raise
            except AssertionError as exc:       # the check's own finding says it all
                raise AssertionError(f"{check.__name__}: {exc}") from None
            except Exception as exc:
                # a learner's own bug (a TypeError in its decide) named by the check that met
                # it, the learner and where it was raised; its traceback stays chained
                raise AssertionError(f"{check.__name__}: {type(clone).__name__} raised "
                                     f"{type(exc).__name__}: {exc} ({_raised_at(exc)})") from exc
        run.__name__ = check.__name__
        return run
    return [(c.__name__, bound(c)) for c in CHECKS if c.__name__ not in skips]


def _raised_at(exc: BaseException) -> str:
    """Where ``exc`` was raised: the deepest frame of its traceback outside numpy and scipy
    (a broadcast error is the caller's line, not numpy's)."""
    import traceback
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not re.search(r"[\\/](numpy|scipy)[\\/]", f.filename)]
    if not frames:
        return "in numpy"
    f = frames[-1]
    return f"{os.path.basename(f.filename)}, line {f.lineno}, in {f.name}"


def _watch_decisions(m) -> None:
    """Wrap each role holder's ``decide`` so that a result off the contract's (an array (B, na)
    for instances X (B, na, d)) fails where it is returned, naming the role, not as a broadcast
    error later or not at all."""
    for holder in getattr(getattr(m, "_roles", None), "holders", ()):
        method = getattr(holder, "decide", None)
        if method is None:
            continue

        def decide(X, *args, _method=method, _name=f"{type(holder).__name__}.decide", **kwargs):
            out = _method(X, *args, **kwargs)
            want = tuple(np.shape(X)[:2])
            if not isinstance(out, np.ndarray) or out.shape != want or out.dtype.kind not in "fiu":
                got = (f"an array of shape {out.shape} and dtype {out.dtype}"
                       if isinstance(out, np.ndarray) else
                       "None" if out is None else f"a {type(out).__name__}")
                raise AssertionError(f"{_name} returned {got} for instances of shape "
                                     f"{tuple(np.shape(X))}; the contract's decision values are "
                                     f"an array of numbers of shape (B, na) = {want}")
            return out
        setattr(holder, "decide", decide)           # the learner looks it up per call


def check_learner(obj, skip=(), mpi: bool = True) -> list:
    """Run every generic check on a learner (each on a fresh clone).

    Parameters
    ----------
    obj : Learner, learner class or str
        The learner to check (a class or a name is built with 3 tasks and 4 features).
    skip : iterable of str
        Checks to leave out, by name.
    mpi : bool
        Include the one-process == MPI check (it starts ``mpiexec``: seconds).

    Returns
    -------
    list of str
        The checks that were skipped as not applying, each with its reason.

    Raises
    ------
    AssertionError
        Naming the first check that failed and what it found (where the learner itself
        raised: the learner, the exception, chained, and where it was raised).

    Examples
    --------
    >>> import omtl_mpi
    >>> omtl_mpi.check_learner("pa", mpi=False)
    []
    """
    skipped = []
    skip = set(skip) | (set() if mpi else {"check_one_process_equals_mpi"})
    for name, run in learner_checks(obj, skip):
        try:
            run()                   # a failure names its check (learner_checks)
        except _Skip as why:
            skipped.append(f"{name}: {why}")
    return skipped


def parametrize_with_checks(learners, skip=()):
    """A pytest decorator: one case per learner and check, with the arguments ``learner`` and
    ``check``; ``check(learner)`` runs the check on a clone of it (scikit-learn's habit), and a
    check that does not apply is skipped with its reason.

    Examples
    --------
    >>> from omtl_mpi.checks import parametrize_with_checks
    >>> @parametrize_with_checks(["pa", "arow"])
    ... def test_learner(learner, check):
    ...     check(learner)
    """
    import pytest
    cases, ids = [], []
    for obj in learners:
        m = _learner(obj)
        for name, run in learner_checks(m, skip):
            cases.append((m, run))
            ids.append(f"{type(m).__name__}-{name}")

    def skipping(run):
        def call(learner=None):
            try:
                run(learner)
            except _Skip as why:
                pytest.skip(str(why))
        return call
    return pytest.mark.parametrize("learner,check", [(m, skipping(r)) for m, r in cases], ids=ids)
