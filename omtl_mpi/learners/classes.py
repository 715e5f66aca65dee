"""Every built-in learner's public class (:class:`CADMM`, ...: a :class:`Learner` with its
parameters in its signature and docstring), :func:`learner` by name and :func:`load` from a
file."""
from __future__ import annotations

import inspect
import re

from ..algorithms import registry
from ..errors import UserError
from .build import _help, parameters
from .learner import Learner
from .state import VERSION, _other_version

CLASS_NAMES = {name: spec.class_name for name, spec in registry.REGISTRY.items() if spec.class_name}


def _docstring(algo: str) -> str:
    spec = registry.get(algo)
    cls = CLASS_NAMES.get(algo, "Learner")
    # a learner whose defaults need the run's length (PMSC-Log's euclid w-step) is given it
    rounds = ", rounds=100" if spec.params().resolved(1) != spec.params().resolved(4) else ""
    lines = [f"{spec.summary}", "", f"{spec.citation}. A :class:`Learner` "
             f"(``omtl_mpi.learner({algo!r}, ...)``): every method is documented there.", "",
             "Parameters", "----------"]
    for name, default in parameters(algo).items():
        shown = "" if default is inspect.Parameter.empty else f", default {default!r}"
        lines += [f"{name}{shown}", f"    {_help(algo, name)}"]
    lines += ["", "Examples", "--------",
              ">>> import omtl_mpi",
              f">>> m = omtl_mpi.{cls}(n_tasks=2, n_features=3{rounds})",
              ">>> m.learn_one([1.0, 0.0, 0.5], 1, task=0)",
              ">>> m.predict_one([1.0, 0.0, 0.5], task=0) in (-1, 1)",
              "True"]
    return "\n".join(lines)


def _make_class(algo: str, name: str) -> type:
    sig = inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + [
        inspect.Parameter(k, inspect.Parameter.POSITIONAL_OR_KEYWORD if k in ("n_tasks", "n_features")
                          else inspect.Parameter.KEYWORD_ONLY, default=v)
        for k, v in parameters(algo).items()])
    spec = registry.get(algo)
    # the generic checks a learner's role class says do not apply to it (omtl_mpi.checks)
    skips = frozenset(getattr(spec.worker or spec.node, "CHECK_SKIPS", ()))
    cls = type(name, (Learner,), {"algo": algo, "__doc__": _docstring(algo), "__module__": "omtl_mpi.learners",
                                  "check_skips": skips})

    def __init__(self, n_tasks, n_features, **params):
        Learner.__init__(self, n_tasks, n_features, **params)
    __init__.__signature__ = sig
    cls.__init__ = __init__
    return cls


for _algo, _name in CLASS_NAMES.items():
    globals()[_name] = _make_class(_algo, _name)
_CLASSES = {algo: globals()[name] for algo, name in CLASS_NAMES.items()}


def learner(algo: str, n_tasks: int, n_features: int, *, preset: str | None = None, **params) -> Learner:
    """A learner of ``omtl-mpi algos`` by name, with its parameters.

    Parameters
    ----------
    algo : str
        ``c-admm``, ``d-admm``, ... (``omtl-mpi algos``), or a learner registered with
        :func:`omtl_mpi.algorithms.registry.register`.
    n_tasks, n_features : int
    preset : {"paper"}, optional
        Start from named settings (``--preset``); parameters given still win.
    **params
        The learner's parameters (:func:`parameters`).

    Examples
    --------
    >>> import omtl_mpi
    >>> m = omtl_mpi.learner("c-admm", n_tasks=4, n_features=9, preset="paper", rounds=100)
    >>> m.w_step, m.intercept, m.relationship
    ('euclid', False, True)
    >>> omtl_mpi.learner("c-admm", 4, 9, rho=-1)
    Traceback (most recent call last):
    ...
    omtl_mpi.errors.UserError: rho must be > 0, got -1.0
    """
    registry.get(algo)                      # an unknown name: one line, with the known ones
    if preset is not None:
        params["preset"] = preset
    cls = _CLASSES.get(algo)
    if cls is None:
        cls = _CLASSES[algo] = _make_class(algo, "".join(p.title() for p in re.split(r"[^a-zA-Z0-9]", algo)))
    return cls(n_tasks, n_features, **params)


def load(path) -> Learner:
    """Read a learner written by :meth:`Learner.save` (parameters and state).

    Raises
    ------
    UserError
        One line, for a file that is not a learner's, or is damaged.

    Examples
    --------
    >>> import os, tempfile, omtl_mpi
    >>> m = omtl_mpi.AROW(n_tasks=2, n_features=3)
    >>> m.learn_one([1.0, 0.5, -1.0], -1, task=1)
    >>> path = os.path.join(tempfile.mkdtemp(), "arow.h5")
    >>> m.save(path)
    >>> again = omtl_mpi.load(path)
    >>> again, bool((again.W_ == m.W_).all()), again.n_rounds_
    (AROW(n_tasks=2, n_features=3), True, 1)
    """
    from ..persist import load_learner
    built = {}

    def expected(algo, params, version):
        """The learner the file's parameters describe, built before any array is read: what
        each of the file's arrays must look like."""
        if version != VERSION:        # another release's layout: say so, not which array differs
            raise _other_version(version, f"{path}: a learner file")
        if algo not in registry.REGISTRY:
            raise UserError(f"{path}: a learner {algo!r}, which is not registered: import the "
                            "module that registers it first")
        lacking = [k for k in parameters(algo) if k not in params]
        if lacking:
            raise UserError(f"{path}: its parameters lack {', '.join(lacking)}; the file is "
                            "damaged: save the learner again")
        rest = dict(params)
        try:
            built["m"] = learner(algo, rest.pop("n_tasks"), rest.pop("n_features"), **rest)
        except UserError as exc:
            raise UserError(f"{path}: {exc}") from None
        return built["m"].state_dict()["state"]
    state = load_learner(path, expected)
    try:
        return built["m"].load_state_dict(state)
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None

