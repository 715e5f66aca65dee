"""Whole runs from arrays: :func:`run_streams` is ``omtl-mpi run`` for streams held in memory,
in one process or in a script started by ``mpiexec -n P python -m mpi4py script.py``.

The run is the command line's (the same set-up, checks, distribution of tasks over ranks,
round loop and collection), so its predictions, errors and learned arrays are those of
``omtl-mpi run`` on the same data and options. mpi4py is imported only when the script runs
under an MPI launcher (or is given a communicator).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .errors import UserError
from .learners import as_array


class ArraySource:
    """Task streams held in memory, as a run reads a data source (``meta``, ``load``)."""

    def __init__(self, X_list, y_list, names=None):
        self.X, self.y, self.bools = _checked_streams(X_list, y_list)
        K = len(self.X)
        self.names = tuple(str(n) for n in names) if names is not None else tuple(f"task{k}" for k in range(K))
        if len(self.names) != K:
            raise UserError(f"names must give one name per task ({K}), got {len(self.names)}")

    def meta(self):
        from .data.taskfile import TaskMeta
        sparse = [X for X in self.X if hasattr(X, "tocsr")]
        facts = {}
        if sparse:          # the streams are laid out as sparse rows (dense ones converted)
            stored = [X.nnz if hasattr(X, "tocsr") else int(np.count_nonzero(X)) for X in self.X]
            most = [int(np.diff(X.indptr).max()) if hasattr(X, "tocsr")
                    else int(np.count_nonzero(X, axis=1).max()) for X in self.X]
            facts = {"nnz": sum(stored), "max_row_nnz": max(most)}
        return TaskMeta(path="<arrays>", names=self.names,
                        lengths=np.array([len(y) for y in self.y], dtype=np.int64),
                        dim=self.X[0].shape[1], source="arrays", description=self.describe(),
                        **facts)

    def load(self, indices):
        from .data.taskfile import TaskStreams
        idx = np.asarray(indices, dtype=np.int64)
        return TaskStreams(indices=idx, names=tuple(self.names[i] for i in idx),
                           X=[self.X[i] for i in idx], y=[self.y[i] for i in idx], notices=[])

    def describe(self) -> str:
        return f"arrays({len(self.X)} tasks, {self.X[0].shape[1]} features)"

    def digest(self) -> str:
        """SHA-256 of the streams' contents (names, features, labels), to compare ranks."""
        import hashlib
        h = hashlib.sha256("\0".join(self.names).encode())
        for X, y in zip(self.X, self.y):
            parts = (X.data, X.indices, X.indptr) if hasattr(X, "tocsr") else (X,)
            for part in parts:
                h.update(np.ascontiguousarray(part).tobytes())
            h.update(np.ascontiguousarray(y).tobytes())
        return h.hexdigest()


def _checked_streams(X_list, y_list):
    """Copies of the streams as float64 features and int8 labels -1/+1, checked; and whether the
    labels came as bools."""
    if isinstance(X_list, np.ndarray) or isinstance(y_list, np.ndarray):
        raise UserError("X_list and y_list are lists with one array per task (a task's stream each)")
    try:
        X_list, y_list = list(X_list), list(y_list)
    except TypeError:
        raise UserError("X_list and y_list are lists with one array per task") from None
    if not X_list or len(X_list) != len(y_list):
        raise UserError(f"X_list and y_list must hold one array per task each, and at least one: "
                        f"got {len(X_list)} and {len(y_list)}")
    Xs, ys, bools, dim = [], [], [], None
    for k, (X, y) in enumerate(zip(X_list, y_list)):
        if hasattr(X, "tocsr"):             # sparse rows stay sparse (their entries checked)
            from .learners.inputs import _sparse_rows
            Xa = _sparse_rows(X)[0]
        else:
            Xa = as_array(X, f"X_list[{k}] is not an array of numbers", np.float64)
        ya = as_array(y, f"y_list[{k}] is not an array of labels")
        if Xa.ndim != 2 or Xa.shape[0] < 1 or Xa.shape[1] < 1:
            raise UserError(f"X_list[{k}] must have shape (n_k, d) with n_k, d >= 1, got {Xa.shape}")
        dim = Xa.shape[1] if dim is None else dim
        if Xa.shape[1] != dim:
            raise UserError(f"every task has the same features: X_list[0] has {dim} columns, "
                            f"X_list[{k}] {Xa.shape[1]}")
        if ya.shape != (Xa.shape[0],):
            raise UserError(f"y_list[{k}] must have shape ({Xa.shape[0]},) (one label per row of "
                            f"X_list[{k}]), got {ya.shape}")
        if not np.isfinite(Xa.data if hasattr(Xa, "tocsr") else Xa).all():
            raise UserError(f"X_list[{k}] holds NaN or inf; every feature must be finite")
        flag = ya.dtype == bool
        if not flag and not (ya.dtype.kind in "iuf" and np.isin(ya, (-1, 1)).all()):
            raise UserError(f"y_list[{k}]: labels are -1 or +1 (or bools)")
        Xs.append(Xa)
        ys.append((np.where(ya, 1, -1) if flag else ya).astype(np.int8))
        bools.append(flag)
    return Xs, ys, any(bools)


@dataclass
class Result:
    """What :func:`run_streams` returns on rank 0 (and :func:`load_result` reads back).

    Attributes
    ----------
    algo : str
    names : tuple of str
        The tasks' names.
    lengths : ndarray of int, shape (K,)
        Instances per task.
    mean_error : float
        The mean over tasks of each task's error rate (the paper's measure).
    overall_error : float
        The mistakes over all instances (the personalisation literature's measure: a task
        weighs by its instances).
    per_task_error : ndarray, shape (K,)
    curve : ndarray, shape (T,)
        The mean over tasks of the cumulative error rate after each round.
    task_curves : list of ndarray
        Every task's cumulative error rate after each of its instances, (n_k,) each.
    predictions : list of ndarray
        Every task's predictions (int8, -1/+1) in the order its stream was presented.
    mistakes : list of ndarray
        Every task's mistakes (int8, 1 where the prediction was wrong), in the same order.
    omega : ndarray or None
        The K x K task-relationship matrix, for the learners that have one, up to 1,024 tasks;
        beyond, None (``model`` holds its factors ``omega_basis``, ``omega_values`` and
        ``omega_rest``, as :class:`~omtl_mpi.Learner` says).
    model : dict
        Every learned array by name (the results file's /model).
    seconds, ms_per_round : float
        Wall time of the rounds.
    report : dict
        What ``omtl-mpi run --json`` prints.
    learner : Learner or None
        The fitted learner, ready to ``predict_one`` or to learn on (None when read from a file).

    Examples
    --------
    >>> import omtl_mpi
    >>> res = omtl_mpi.run_streams([[[1.0], [-1.0]], [[2.0], [-2.0]]], [[1, -1], [1, -1]], algo="pa")
    >>> res
    Result(algo='pa', tasks=2, rounds=2, mean_error=0.2500)
    >>> res.per_task_error.tolist(), res.names
    ([0.5, 0.0], ('task0', 'task1'))
    """

    algo: str
    names: tuple
    lengths: np.ndarray
    mean_error: float
    overall_error: float
    per_task_error: np.ndarray
    curve: np.ndarray
    task_curves: list
    predictions: list
    mistakes: list
    omega: np.ndarray | None
    model: dict
    seconds: float
    ms_per_round: float
    report: dict
    learner: object = None
    _written: tuple | None = field(default=None, repr=False)

    def _run(self) -> tuple:
        if self._written is None:
            raise UserError("this Result was not made by run_streams or load_result: it has no "
                            "run to write")
        return self._written

    def __repr__(self) -> str:
        return (f"Result(algo={self.algo!r}, tasks={len(self.names)}, rounds={len(self.curve)}, "
                f"mean_error={self.mean_error:.4f})")

    def to_pandas(self):
        """One row per task: name, samples, error, balanced error and F1 (needs pandas)."""
        try:
            import pandas as pd
        except ImportError:
            raise UserError("to_pandas needs pandas: pip install pandas") from None
        attrs, config, learned, measured = self._run()
        return pd.DataFrame({"task": list(self.names), "samples": self.lengths,
                             "error": self.per_task_error,
                             "balanced_error": learned.metrics["per_task_balanced_error"],
                             "f1": learned.metrics["per_task_f1"]})

    def save(self, path) -> None:
        """Write the results file of ``omtl-mpi run --out`` (HDF5, atomically)."""
        from .paths import output_file
        from .runtime.results import write_results
        path = output_file(path, "path")
        attrs, config, learned, measured = self._run()
        write_results(path, attrs=attrs, config=config, learned=learned, measured=measured)


def _result(report: dict, learner=None) -> Result:
    attrs, config, learned, measured = report["_written"]
    m = learned.metrics
    lengths = np.asarray(learned.lengths)
    cuts = np.cumsum(lengths)[:-1]
    preds = np.split(np.asarray(learned.predictions), cuts)
    mistakes = np.split(np.asarray(m["mistakes"]), cuts)
    curves = [np.cumsum(wrong, dtype=np.float64) / np.arange(1, len(wrong) + 1) for wrong in mistakes]
    public = {k: v for k, v in report.items() if not k.startswith("_")}
    return Result(algo=attrs.get("algo", ""), names=tuple(learned.names), lengths=lengths,
                  mean_error=float(np.mean(m["per_task_error"])) if len(lengths) else 0.0,
                  overall_error=float(np.sum(m["mistakes"]) / max(int(lengths.sum()), 1)),
                  per_task_error=np.asarray(m["per_task_error"]), curve=np.asarray(m["mean_curve"]),
                  task_curves=curves, predictions=preds, mistakes=mistakes,
                  omega=learned.model.get("omega"), model=dict(learned.model),
                  seconds=float(attrs.get("seconds", 0.0)),
                  ms_per_round=float(attrs.get("ms_per_round", 0.0)), report=public,
                  learner=learner, _written=report["_written"])


def run_streams(X_list, y_list, algo: str = "c-admm", *, seed: int | None = None, batch: int = 1,
                names=None, comm=None, out=None, progress: bool = False, **options):
    """Run a learner over task streams held in memory, as ``omtl-mpi run`` runs a data file.

    Parameters
    ----------
    X_list : list of array_like, each (n_k, d)
        Every task's features, in stream order.
    y_list : list of array_like, each (n_k,)
        Every task's labels, -1 or +1 (or bools).
    algo : str
        The learner (``omtl-mpi algos``).
    seed : int, optional
        Present each stream in an order drawn from this seed (``--seed``); None: as given.
    batch : int
        Instances per task per round (``--batch``).
    names : sequence of str, optional
        The tasks' names (default task0, task1, ...).
    comm : mpi4py communicator, optional
        Under ``mpiexec``, the communicator to run on (default COMM_WORLD when launched by
        MPI, else one process). Every rank calls ``run_streams`` with the same arguments.
    out : str, optional
        Also write the results file (as ``--out``).
    progress : bool
        Show a progress bar on rank 0.
    **options
        Any option of ``omtl-mpi run`` by name (``rho=0.5``, ``preset="paper"``,
        ``topology="full"``, ``nodes=4``, ``intercept=False``...).

    Returns
    -------
    Result or None
        On rank 0 (and in one process) the result, with the fitted learner; None on the other
        ranks.

    Raises
    ------
    UserError
        On every rank, with the same message, for bad streams or options (or streams that
        differ between ranks); on rank 0 only for writing ``out`` and joining the fitted
        learner (a full disk, rank 0's memory), which happen after the others have returned.

    Examples
    --------
    >>> import omtl_mpi
    >>> from omtl_mpi.data import generate
    >>> names, X, y = generate(tasks=3, samples=200, seed=0)
    >>> res = omtl_mpi.run_streams(X, y, algo="c-admm", seed=0, names=names)
    >>> res.per_task_error.shape, res.curve.shape, 0.0 <= res.mean_error < 0.5
    ((3,), (200,), True)
    >>> res.learner.predict_one(X[0][0], task=0) in (-1, 1)
    True
    """
    from .learners.build import _api_text
    from .options import run_config
    from .runtime.run import collect, learn, set_up
    from .paths import as_path
    from .runtime.world import SetupFailed, collective, default_world
    if comm is None:
        world = default_world()
    else:
        from .comm.mpi import MpiWorld
        from mpi4py import MPI
        if not isinstance(comm, MPI.Intracomm):
            raise UserError(f"comm must be an mpi4py communicator (MPI.COMM_WORLD or one split "
                            f"from it), got {comm!r}")
        world = MpiWorld(comm)
    # a file name, on every rank alike (5 or None-like values are no name); its folder is
    # checked by rank 0 in set_up, which every rank hears of
    out = None if out is None else as_path(out, "out")
    foreign = sorted(k for k in options if k == "data" or k.startswith("synth_"))
    if foreign:
        raise UserError(f"run_streams learns from X_list and y_list: {', '.join(foreign)} "
                        "(a data file or the synthetic family) does not apply; leave it out")
    source = collective(world, lambda: ArraySource(X_list, y_list, names))
    # every rank must have been given the same streams (not unseeded draws): their digests agree
    if len(set(world.agree(source.digest()))) > 1:
        raise SetupFailed("the ranks were given different streams: every rank must call "
                          "run_streams with the same X_list and y_list (seed any random draw)")
    def config():
        try:
            return run_config(_given(algo, {"data": "<arrays>", "seed": seed, "batch": batch,
                                            **options}))
        except UserError as exc:
            raise UserError(_api_text(str(exc))) from None
    cfg = collective(world, config)
    try:
        job = set_up(cfg, world, out=out if world.rank == 0 else None, source=source)
    except UserError as exc:            # the same on every rank: in the API's words
        raise SetupFailed(_api_text(str(exc))) from None
    try:
        learn(job, progress)
    except UserError as exc:            # a model gone non-finite, a divergence: the API's words
        raise type(exc)(_api_text(str(exc))) from None
    # the states first, while every rank is still in the call: what follows (the results
    # file, the fitted learner) happens on rank 0 alone, and nothing waits on it there
    states = world.gather_objects(job.roles.state())
    report = collect(job, out)
    return _result(report, _fitted(job, states, source)) if world.rank == 0 else None


def _given(algo: str, values: dict) -> dict:
    """The options that differ from their defaults for learner ``algo`` (``algo`` included):
    the rest are left to the defaults, so that passing a learner's full parameters (as
    ``get_params()`` gives them) is never refused for a default that has no effect."""
    from .learners.state import _same
    from .options import table
    opts = table()
    out = {"algo": algo}
    for name, value in values.items():
        opt = opts.get(name)
        default = None if opt is None else opt.defaults.get(algo, opt.default)
        if opt is None or name in ("data", "preset") or not _same(value, default):
            out[name] = value
    return out


def _fitted(job, states: list, source):
    """The learner object holding the run's final state (all ranks' parts, on rank 0)."""
    from .algorithms.contract import merge_states
    from .config import MODEL_OPTIONS
    from .learners import learner, parameters
    algo, cfg = job.algo, job.cfg
    known = parameters(algo.name)
    params = {k: v for k, v in asdict(cfg.params).items() if k in known}
    params.update({k: getattr(cfg, k) for k in MODEL_OPTIONS})
    if algo.pattern == "neighbours":
        params.update(topology=cfg.topology, nodes=job.topology.n_nodes)
    m = learner(algo.name, job.meta.n_tasks, job.meta.dim, rounds=job.rounds, **params)
    from .learners.state import _fits, first_difference
    try:
        if len(states) == 1:
            merged = states[0]
        elif algo.pattern == "server":
            merged = {"holder0": merge_states(algo.worker, [s["holder0"] for s in states[1:]]),
                      "server": states[0]["server"]}
        elif algo.pattern == "none":
            merged = {"holder0": merge_states(algo.node, [s["holder0"] for s in states])}
        else:
            merged = {f"holder{r}": s["holder0"] for r, s in enumerate(states)}
        problem = first_difference(merged, m._roles.state(), "state", _fits)
    except ValueError as exc:
        problem = str(exc)
    if problem:
        raise UserError(f"the ranks' states do not join into one learner of {algo.name} "
                        f"({problem}): its role class's TASK_AXIS must name every per-task array "
                        "with the axis of its tasks")
    m._roles.load_state(merged)
    m.n_rounds_ = job.rounds
    m.n_seen_ = np.asarray(job.meta.lengths, dtype=np.int64).copy()
    m._bool_labels = source.bools
    if m._scale_max is not None:
        # online scaling's running maximum after a whole stream: its largest |value| per feature
        m._scale_max[...] = [np.abs(X).max(axis=0) for X in source.X]
    return m


def _read_schedule(f, read, path) -> dict | None:
    """A results file's /schedule (--sync partial), checked for shape and type; None without."""
    if "schedule" not in f:
        return None
    group = read(f, "schedule")
    graph = "taken" not in group            # a graph's: used only, node x round x neighbour
    out = {"taken": None if graph else read(group, "taken")[()], "used": read(group, "used")[()]}
    shapes = [v.shape for v in out.values() if v is not None]
    if (any(v.dtype.kind != "i" for v in out.values() if v is not None)
            or any(len(shape) != (3 if graph else 2) for shape in shapes) or len(set(shapes)) > 1):
        raise UserError(f"{path}: /schedule's arrays are not integer arrays of the shapes a "
                        "schedule has; the file is damaged")
    for key in ("max_delay", "replayed") + (() if graph else ("min_workers",)):
        value = group.attrs.get(key)
        if value is None:
            raise UserError(f"{path}: /schedule lacks its attribute {key}; the file is damaged")
        out[key] = bool(value) if key == "replayed" else int(value)
    out.setdefault("min_workers", None)
    return out


def load_result(path) -> Result:
    """A results file (``omtl-mpi run --out``, ``Result.save``) as a :class:`Result` (without the
    fitted learner: a results file holds the final arrays, not the learner's whole state).

    Raises
    ------
    UserError
        One line, for a file that is not an omtl-mpi results file or is damaged.

    Examples
    --------
    >>> import os, tempfile, omtl_mpi
    >>> res = omtl_mpi.run_streams([[[1.0], [-1.0]], [[2.0], [-2.0]]], [[1, -1], [1, -1]], algo="pa")
    >>> path = os.path.join(tempfile.mkdtemp(), "run.h5")
    >>> res.save(path)
    >>> omtl_mpi.load_result(path).per_task_error.tolist()
    [0.5, 0.0]
    """
    import json

    import h5py

    from .data.taskfile import H5_ERRORS, own_item, reason
    from .paths import regular_file
    from .runtime.results import FORMAT, VERSION, Learned, Measured
    path = regular_file(path, "results file")

    def read(group, key):
        """An object of the file, never through a link, with one line where it is not."""
        try:
            return own_item(group, key)
        except LookupError as what:
            raise UserError(f"{path}: {group.name.rstrip('/')}/{key} is {what}; the file is "
                            "damaged") from None
    try:
        with h5py.File(path, "r") as f:
            if f.attrs.get("format") != FORMAT:
                raise UserError(f"{path} is not an omtl-mpi results file (omtl-mpi run --out "
                                "writes them)")
            version = f.attrs.get("format_version")
            if isinstance(version, (int, np.integer)) and not isinstance(version, bool):
                version = int(version)
            if not isinstance(version, int) or version != VERSION:
                which = "an older" if isinstance(version, int) and version < VERSION else "another"
                raise UserError(f"{path}: results of format version {version!r}, written by "
                                f"{which} omtl-mpi; this release reads version {VERSION}: read "
                                "it with the omtl-mpi that wrote it, or run again")
            attrs = {k: (v.item() if hasattr(v, "item") else v) for k, v in f.attrs.items()}
            config = json.loads(attrs.get("config", "{}"))
            if not isinstance(config, dict):
                raise UserError(f"{path}: its config attribute is not a configuration")
            names = tuple(n.decode() if isinstance(n, bytes) else str(n) for n in read(read(f, "tasks"), "names")[()])
            lengths = read(read(f, "tasks"), "samples")[()]
            metrics = {k: read(read(f, "metrics"), k)[()] for k in read(f, "metrics")}
            # the error by stream length is the group's attribute (JSON), which save writes back
            metrics["by_length"] = json.loads(read(f, "metrics").attrs.get("error_by_length", "[]"))
            model = {k: read(read(f, "model"), k)[()] for k in read(f, "model")}
            preds = read(f, "predictions")[()]
            total = int(np.sum(lengths))
            if (len(names) != len(lengths) or np.shape(preds) != (total,)
                    or np.shape(metrics.get("mistakes")) != (total,)):
                raise UserError(f"{path}: its predictions do not match its tasks' lengths; the "
                                "file is damaged")
            # h5py readers split the per-instance arrays by /tasks/offsets: they must agree
            offsets = read(read(f, "tasks"), "offsets")[()]
            if (np.shape(offsets) != (len(lengths) + 1,) or offsets.dtype.kind not in "iu"
                    or not np.array_equal(offsets, np.concatenate(([0], np.cumsum(lengths))))):
                raise UserError(f"{path}: /tasks/offsets does not match /tasks/samples; the file "
                                "is damaged")
            t = read(f, "timing")
            optional = {name: read(t, name)[()] if name in t else None
                        for name in ("peak_rss_mib", "cpu_seconds", "staleness", "finish_seconds",
                                     "injected_seconds", "last_at_barrier", "predicted_at",
                                     "hosts", "shm_group", "bytes", "peer_bytes")}
            def attrs_of(name):
                return read(t, name).attrs if optional[name] is not None else {}

            def texts(values):
                return [v.decode() if isinstance(v, bytes) else str(v) for v in values]
            measured = Measured(seconds=read(t, "seconds")[()], roles=texts(read(t, "roles")[()]),
                                peak_rss=optional["peak_rss_mib"], cpu_seconds=optional["cpu_seconds"],
                                staleness=optional["staleness"], finished=optional["finish_seconds"],
                                injected=optional["injected_seconds"], last=optional["last_at_barrier"],
                                workers=[int(r) for r in attrs_of("last_at_barrier").get("workers", [])],
                                stragglers=str(t.attrs.get("stragglers", "none")),
                                schedule=_read_schedule(f, read, path),
                                predicted_at=optional["predicted_at"],
                                predicted_unit=str(attrs_of("predicted_at").get("unit", "")),
                                blocks=attrs_of("predicted_at").get("blocks"),
                                hosts=None if optional["hosts"] is None else texts(optional["hosts"]),
                                shm_groups=optional["shm_group"], traffic=optional["bytes"],
                                peer_bytes=optional["peer_bytes"])
            keep = {k: v for k, v in attrs.items()
                    if k not in ("format", "format_version", "omtl_mpi_version", "created", "host", "config")}
            learned = Learned(names=names, lengths=lengths, metrics=metrics, model=model, predictions=preds)
            return _result({**keep, "_written": (keep, config, learned, measured)})
    except UserError:
        raise
    except (*H5_ERRORS, json.JSONDecodeError) as exc:
        raise UserError(f"{path}: cannot read it as a results file ({reason(exc)})") from None
