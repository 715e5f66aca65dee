"""A learner's parameters: their names and defaults (:func:`parameters`), their help, the checks
and the building of its engine (:func:`build_learner`), and the command line's messages as a
Python caller spells them (:func:`api_text`)."""
from __future__ import annotations

import inspect
import re
from dataclasses import fields

import numpy as np

from ..algorithms import registry
from ..config import MODEL_OPTIONS
from ..errors import UserError

# the parameters that say how an instance names its task (no learned state depends on them)
_NAMING = ("task_key", "default_task")
_GRAPH_OPTIONS = ("topology", "nodes")


def _api_text(message: str) -> str:
    """A message of the command line's as a Python caller spells things: ``--w-step`` ->
    ``w_step``, ``--scale online`` -> ``scale='online'`` (a value among the option's choices),
    ``--no-experts`` -> ``experts=False``, ``--algo hashed`` -> ``learner('hashed', ...)``."""
    from ..options import PRESETS, table
    opts = {o.flag: o for o in table().values()}
    for cli, api in _API_PHRASES.items():
        message = message.replace(cli, api)
    message = re.sub(r"--algo ([a-z0-9-]+)", r"learner('\1', ...)", message)
    message = re.sub(r"--no-([a-z0-9-]+)", lambda m: f"{m.group(1).replace('-', '_')}=False", message)

    def keyword(m) -> str:
        flag, value = m.group(1), m.group(2)
        name = flag[2:].replace("-", "_")
        choices = PRESETS if flag == "--preset" else getattr(opts.get(flag), "choices", None) or ()
        if value is not None and value in choices:
            return f"{name}={value!r}"
        return name + (f" {value}" if value is not None else "")
    return re.sub(r"(--[A-Za-z][A-Za-z0-9-]*)(?: ([A-Za-z][A-Za-z0-9-]*))?", keyword, message)


# what the command line's advice says of the import, as a learner's keywords say it
_API_PHRASES = {"import with a smaller --dims": "a smaller n_features",
                "a smaller --dims": "a smaller n_features"}


def parameters(algo: str) -> dict:
    """The constructor parameters of learner ``algo`` with their defaults, in order.

    ``n_tasks`` and ``n_features`` come first (required), then the run options that shape the
    learner (``intercept``, ``scale``; ``topology`` and ``nodes`` for the neighbour learners),
    ``rounds``, ``task_key`` and ``default_task``, then the learner's hyper-parameters: the same names, defaults
    and checks as ``omtl-mpi run`` and sweep files (:mod:`omtl_mpi.options`).

    Examples
    --------
    >>> import omtl_mpi
    >>> params = omtl_mpi.parameters("pa")
    >>> list(params)[2:], params["C"]
    (['intercept', 'scale', 'rounds', 'task_key', 'default_task', 'C'], 1.0)
    """
    from ..options import table
    spec = registry.get(algo)
    opts = table()
    out = {"n_tasks": inspect.Parameter.empty, "n_features": inspect.Parameter.empty}
    names = MODEL_OPTIONS + (_GRAPH_OPTIONS if spec.pattern == "neighbours" else ())
    out.update({name: opts[name].default for name in names})
    out["rounds"] = None
    out["task_key"] = None
    out["default_task"] = 0
    out.update({f.name: f.default for f in fields(spec.params)})
    return out


def _help(algo: str, name: str) -> str:
    from ..options import table
    own = {"n_tasks": "Number of tasks K (>= 1).",
           "n_features": "Features per instance d (>= 1): the length of x, or for dict features "
                         "the number of coordinates their names are hashed into (names that "
                         "collide add up, as in any feature hashing); the intercept adds one "
                         "weight.",
           "rounds": "Rounds the stream will last, for the hyper-parameters whose default depends "
                     "on the run's length (eta of the euclid w-step: sqrt(rounds)); None: not "
                     "known (then such a hyper-parameter must be given).",
           "default_task": "The task of a dict x without the task_key entry (river's "
                           "convention: a feature may go missing; river's own checks send "
                           "such instances), said once by a UserWarning; None: such an x is "
                           "an error.",
           "task_key": "Key of x holding the task when x is a dict (river's progressive "
                       "validation passes x alone); None: give task= to every call."}
    if name in own:
        return own[name]
    opt = table()[name]
    return _api_text(opt.helps.get(algo, opt.help))


def _build(algo: str, n_tasks, n_features, params: dict) -> dict:
    """Check a learner's parameters and build its roles; raises UserError, changes nothing."""
    from ..options import PRESETS, preset_values, run_config, table
    from ..engine import build
    from ..engine.placement import graph_nodes
    spec = registry.get(algo)
    for name, value in (("n_tasks", n_tasks), ("n_features", n_features)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise UserError(f"{name} must be an integer >= 1, got {value!r}")
    n_tasks, n_features = int(n_tasks), int(n_features)
    known = parameters(algo)
    params = dict(params)
    preset = params.pop("preset", None)
    if preset is not None:
        if preset not in PRESETS:
            raise UserError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
        values = preset_values(preset, spec, table())
        params = {**{k: v for k, v in values.items() if k in known}, **params}
    # numpy scalars are numbers like any other (the option table takes Python's)
    params = {k: v.item() if isinstance(v, np.generic) else v for k, v in params.items()}
    unknown = [k for k in params if k not in known]
    if unknown:
        import difflib
        near = difflib.get_close_matches(unknown[0], known, n=1)
        raise UserError(f"{algo} has no parameter {unknown[0]!r}"
                        + (f" (did you mean {near[0]!r}?)" if near else "")
                        + f"; its parameters: {', '.join(known)}")
    given = {"n_tasks": n_tasks, "n_features": n_features}
    given.update({k: params.get(k, v) for k, v in list(known.items())[2:]})
    opts = table()
    for k, v in given.items():          # eta="auto" is the default None, as on the command line
        if k in opts and opts[k].none_text is not None and v == opts[k].none_text:
            given[k] = None
    rounds = given["rounds"]
    if given["task_key"] is not None and (not isinstance(given["task_key"], (str, int))
                                          or isinstance(given["task_key"], bool)):
        raise UserError(f"task_key must be a dict key (a string or an integer) or None, got "
                        f"{given['task_key']!r}")
    default = given["default_task"]
    if default is not None and (isinstance(default, (bool, np.bool_)) or not isinstance(default, (int, np.integer))
                                or not 0 <= default < n_tasks):
        raise UserError(f"default_task must be a task (an integer from 0 to {n_tasks - 1}) or None, "
                        f"got {default!r}")
    given["default_task"] = None if default is None else int(default)
    if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer))
                               or rounds < 1):
        raise UserError(f"rounds must be an integer >= 1 or None, got {rounds!r}")
    given["rounds"] = rounds = None if rounds is None else int(rounds)   # JSON-ready, as all
    # the option table checks types and values, refuses what has no effect, and builds the
    # learner's hyper-parameters: only what differs from the defaults counts as given, so that a
    # clone (every parameter passed) is never refused for a default that does nothing
    values = {"algo": algo}
    values.update({k: v for k, v in given.items()
                   if k not in ("n_tasks", "n_features", "rounds") + _NAMING and v != known[k]})
    try:
        cfg = run_config(values)
    except UserError as exc:
        raise UserError(_api_text(str(exc))) from None
    # the values as validated ("0.5" given is 0.5 stored; intercept=1 is True), so that
    # get_params, the repr and saved files hold what the learner uses
    for k in given:
        if hasattr(cfg.params, k):
            given[k] = getattr(cfg.params, k)
        elif k in MODEL_OPTIONS + _GRAPH_OPTIONS:
            given[k] = getattr(cfg, k)
    if rounds is None and cfg.params.resolved(1) != cfg.params.resolved(4):
        raise UserError(f"{algo}'s step control eta depends on the run's length with these "
                        "parameters (sqrt(T) for the euclid w-step): give eta= or rounds=")
    resolved = cfg.params.resolved(int(rounds or 1))
    dim = n_features + int(bool(cfg.intercept))
    from ..runtime.run import check_model_memory
    try:                                    # before anything is allocated
        check_model_memory(cfg, n_tasks, dim, 1, spec.pattern)
    except UserError as exc:
        raise UserError(_api_text(str(exc))) from None
    topology = None
    if spec.pattern == "neighbours":
        from ..topology import load_topology
        topology = load_topology(cfg.topology, graph_nodes(1, n_tasks, spec, cfg.nodes))
    roles = build(spec, resolved, n_tasks, dim, topology=topology)
    return {"given": given, "roles": roles, "dim": dim}

