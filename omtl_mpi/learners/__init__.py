"""Learner objects: every learner of ``omtl-mpi algos`` as a Python object that learns from
arrays or from instances arriving one at a time, in one process.

Three shapes of the same learner, each the shape its users know:

* river's, one instance at a time: :meth:`Learner.learn_one`, :meth:`Learner.predict_one`,
  :meth:`Learner.decision_one`;
* the paper's, one round of every task at a time: :meth:`Learner.learn_round`,
  :meth:`Learner.predict_round`;
* scikit-learn's, a batch of instances with their tasks: :meth:`Learner.partial_fit`,
  :meth:`Learner.predict`, :meth:`Learner.decision_function`.

The learners are round-based, as in the paper (docs/GUIDE.md, *From Python*): in a round
every task with an instance predicts it, then the labels are revealed and the learner steps
once; a task without an instance is *inactive* in it, as a stream that has ended is in
``omtl-mpi run``. ``learn_round(X, y, active)`` is one round of ``omtl-mpi run`` (the same
predictions, learned arrays equal to 1e-10); ``learn_one(x, y, task=k)`` a round in which only
task k is active; ``partial_fit(X, y, tasks=...)`` puts the j-th instance of every task in
round j of the call, as ``omtl-mpi run --batch 1`` lays out streams.

Predictions are made before the labels of their round are read, and ``predict_*`` never
changes the learner. ``decision_*`` is the number whose sign is the prediction (``>= 0`` is
+1, as ``sign(0) = +1`` throughout): a margin, or for the experts' vote the weighted vote.

Every bad input raises :class:`omtl_mpi.UserError` (a ``ValueError``) with one line that says
what to fix, before anything changes.
"""
from .build import parameters
from .classes import CLASS_NAMES, learner, load
from .inputs import as_array
from .learner import Learner, _restore  # noqa: F401  (what pickles of a learner call)
from .state import FORMAT, VERSION, first_difference
from . import classes as _classes

# every built-in learner's class, here where users and pickles find it (omtl_mpi.learners.CADMM)
globals().update({name: getattr(_classes, name) for name in CLASS_NAMES.values()})

__all__ = ["CLASS_NAMES", "FORMAT", "Learner", "VERSION", "as_array", "first_difference",
           "learner", "load", "parameters", *CLASS_NAMES.values()]
