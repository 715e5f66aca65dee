"""A sweep file (TOML) expanded into the list of runs it names, each checked before any is launched.

A sweep file (every key, with an example: docs/GUIDE.md, *Sweeps*; scripts/paper.toml) names
data sets (``[data.KEY]``), learner entries (``[algorithms.KEY]``, with options, topologies and
grids), seeds, timeouts, a cap on the ranks and how ``--launcher slurm`` submits (``[slurm]``).
Runs are the cross product data x algorithms x topologies x grid x seeds, with ids such as
``synthetic.d-admm.ring.rho=0.1.s0`` (the topology appears where an entry lists several) that
do not change when the file is edited elsewhere.
"""
import ast
import functools
import hashlib
import itertools
import json
import os
import re
import tomllib
from dataclasses import dataclass, field, replace

from .. import options as run_options
from ..errors import ConfigError, UserError
from ..paths import regular_file

DEFAULT_TIMEOUT = 3600.0
# options a sweep sets itself; an entry may not set them through `options` or `grid`
_RESERVED = {"data", "algo", "out", "json", "np", "seed", "topology", "checkpoint", "checkpoint-every",
             "resume", "progress", "no-progress", "synth-tasks", "synth-samples", "synth-seed",
             "synth-normalize"}
# options of 'omtl-mpi run' outside the option table that an entry may pass on: fault injection,
# to try out what a failed run does to a sweep, and stragglers, to measure what they cost
_PASSED = ("fail-at", "fail-rank", "fail-mode", "slow", "delays", "delay-seed")
_TOP_KEYS = {"name", "seeds", "timeout", "max_ranks", "data", "algorithms", "description", "slurm"}
_DATA_KEYS = {"path", "synthetic", "label", "optional", "target", "batch"}
_SYNTH_KEYS = {"tasks", "samples", "seed", "normalize"}
_ALGO_KEYS = {"algo", "label", "ranks", "topology", "options", "grid", "timeout"}


@dataclass(frozen=True)
class DataSet:
    key: str
    label: str
    values: dict = field(repr=False)        # the options that select it, by name
    args: tuple            # the same as 'omtl-mpi run' arguments
    # a data file's digest (file_digest), which stands for its path where runs are compared:
    # the results depend on its bytes, not on where it lies; None for synthetic data
    identity: str | None
    tasks: int
    target: float | None
    describe: str


@dataclass(frozen=True)
class Run:
    """One run of a sweep: its id, the 'omtl-mpi run' arguments (without --out) and its ranks."""

    id: str
    data: str
    algorithm: str
    algo: str
    topology: str | None
    shown_topology: str | None      # the topology when it is a grid axis of its entry
    grid: dict
    seed: int | None
    ranks: int
    timeout: float
    args: tuple = field(repr=False)
    # the resolved configuration's fingerprint: what the arguments mean to this version, so
    # that a run is not taken as done when the defaults it relied on have changed
    fingerprint: str = field(default="", repr=False)
    # args with the data file's path replaced by a digest of its contents (args if synthetic)
    hashed_args: tuple = field(default=(), repr=False)

    @property
    def variant(self) -> str:
        """The run's id without its data set and seed: what a table row stands for."""
        return _join([self.algorithm, self.shown_topology] + [f"{k}={_text(v)}" for k, v in self.grid.items()])

    @property
    def config_hash(self) -> str:
        """Changes whenever anything that determines the run's results changes: the options
        and what they resolve to, the ranks, the data file's contents (not where it lies) and
        the package's code."""
        return hashlib.sha256(json.dumps([self.hashed_args or self.args, self.ranks, self.fingerprint,
                                          code_digest()]).encode()).hexdigest()[:16]


@functools.cache
def code_digest() -> str:
    """A digest of every source file of the installed omtl_mpi package, so that a sweep re-runs
    what a change of the code may have changed instead of reporting runs of older code."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            h.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:16]


def file_digest(path: str) -> str:
    """A digest of the file's bytes (computed once per process while the file is unchanged),
    short: it stands for the file in a run's hash."""
    from ..data.taskfile import file_digest as full
    return full(path)[: len("sha256:") + 32]


@dataclass
class Plan:
    name: str
    path: str
    data: list
    algorithms: dict        # key -> {"label", "algo"}
    runs: list
    skipped: list           # one line per optional data set that is missing
    # the [slurm] table, checked (runtime.launchers.slurm.settings): how --launcher slurm submits
    slurm: dict = field(default_factory=dict)


def _text(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _join(parts) -> str:
    return ".".join(re.sub(r"[^A-Za-z0-9_=+.-]+", "_", str(p)) for p in parts if p is not None)


def rank_count(expr, tasks: int, where: str) -> int:
    """Evaluate ``ranks``: an integer, or an expression of ``tasks`` with + - * // and
    min()/max(), e.g. ``"tasks+1"`` or ``"min(tasks, 4)"``."""
    if isinstance(expr, bool) or not isinstance(expr, (int, str)):
        raise ConfigError(f"{where}: ranks must be a number or an expression such as \"tasks+1\", "
                          f"got {expr!r}")
    if isinstance(expr, int):
        value = expr
    else:
        try:
            value = _evaluate(ast.parse(expr, mode="eval").body, tasks)
        except (SyntaxError, ValueError, ZeroDivisionError) as exc:
            raise ConfigError(f"{where}: cannot evaluate ranks = {expr!r} ({exc}); use a number "
                              "or an expression of 'tasks' with + - * // min() max()") from None
    if value < 1:
        raise ConfigError(f"{where}: ranks = {expr!r} gives {value} for {tasks} tasks; it must be >= 1")
    return value


def _evaluate(node, tasks: int) -> int:
    ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b}
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id == "tasks":
        return tasks
    if isinstance(node, ast.BinOp) and type(node.op) in ops:
        return ops[type(node.op)](_evaluate(node.left, tasks), _evaluate(node.right, tasks))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max")
            and node.args and not node.keywords):
        values = [_evaluate(a, tasks) for a in node.args]
        return min(values) if node.func.id == "min" else max(values)
    raise ValueError(f"'{ast.unparse(node)}' is not allowed")


def _option_args(options: dict, where: str, values: dict, passed: dict) -> list[str]:
    """TOML ``{rho = 0.5, no-relationship = true}`` as command-line arguments, in the file's
    order; the table's options are added to ``values`` (by name), the others to ``passed``."""
    args = []
    for key, value in options.items():
        flag = key.replace("_", "-")
        if flag in _RESERVED:
            raise ConfigError(f"{where}: '{key}' is set by the sweep itself (data, algo, topology, "
                              "seeds, output); remove it from options/grid")
        if not isinstance(value, (int, float, str)):
            raise ConfigError(f"{where}: option '{key}' must be a number, string or true/false, "
                              f"got {value!r}")
        if flag in _PASSED:
            passed[flag] = value
            args += ["--" + flag, _text(value)]
            continue
        try:
            named = run_options.from_flags({flag: value})
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc} (see 'omtl-mpi run --help')") from None
        values.update(named)
        args += run_options.to_args(named)
    return args


def _check_faults(faults: dict, ranks: int) -> None:
    """The fault- and straggler-injection options checked as 'omtl-mpi run --np' checks them."""
    from ..engine.stragglers import Stragglers, parse_slow
    from ..runtime.faults import Fault
    rank = faults.get("fail-rank", 0)
    if isinstance(rank, bool) or not isinstance(rank, int):
        raise ConfigError(f"--fail-rank must be an integer, got {rank!r}")
    Fault(faults.get("fail-at"), rank, faults.get("fail-mode", "raise")).check_world(ranks)
    seed = faults.get("delay-seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"--delay-seed must be an integer >= 0, got {seed!r}")
    slow = [faults["slow"]] if "slow" in faults else []
    Stragglers(parse_slow(slow), faults.get("delays"), seed).check_world(ranks)


def _table(doc: dict, key: str, where: str) -> dict:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: '{key}' must be a table, got {value!r}")
    return value


def _unknown(table: dict, allowed: set, where: str) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise ConfigError(f"{where}: unknown key{'s' if len(extra) > 1 else ''} {', '.join(extra)}; "
                          f"allowed: {', '.join(sorted(allowed))}")


def _as_list(value, where: str) -> list:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ConfigError(f"{where}: an empty list gives no runs")
    return values


def _data_set(key: str, entry: dict, base: str, where: str):
    """(DataSet, None) or (None, skip notice) for one [data.KEY] table."""
    from ..data.taskfile import read_meta
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be a table with 'path' or 'synthetic'")
    _unknown(entry, _DATA_KEYS, where)
    if ("path" in entry) == ("synthetic" in entry):
        raise ConfigError(f"{where}: give exactly one of path = \"FILE.h5\" or synthetic = {{ tasks = 5, ... }}")
    target = entry.get("target")
    if target is not None and (isinstance(target, bool) or not isinstance(target, (int, float))
                               or not 0 < target <= 1):
        raise ConfigError(f"{where}: target is a mean accuracy in (0, 1], got {target!r}")
    values = {"data": "synthetic", "batch": entry.get("batch")}      # in the order of their args
    if "synthetic" in entry:
        synth = entry["synthetic"]
        if not isinstance(synth, dict):
            raise ConfigError(f"{where}: synthetic must be a table such as {{ tasks = 5, samples = 2000 }}")
        _unknown(synth, _SYNTH_KEYS, where + ".synthetic")
        values.update({f"synth_{k}": synth[k] for k in ("tasks", "samples", "seed", "normalize") if k in synth})
        tasks = synth.get("tasks", 5)
        if isinstance(tasks, bool) or not isinstance(tasks, int) or tasks < 1:
            raise ConfigError(f"{where}.synthetic: tasks must be an integer >= 1, got {tasks!r}")
        describe = "synthetic " + json.dumps(synth, sort_keys=True)
    else:
        path = entry["path"]
        if not isinstance(path, str):
            raise ConfigError(f"{where}: path must be a string, got {path!r}")
        path = os.path.normpath(os.path.join(base, os.path.expanduser(path)))
        if not os.path.exists(path):
            if entry.get("optional", False):
                return None, f"data set {key}: {path} does not exist; skipped (optional)"
            raise ConfigError(f"{where}: {path} does not exist (paths are relative to the sweep "
                              "file; import the data first, or mark the data set optional = true)")
        tasks = read_meta(path).n_tasks
        values["data"] = path
        describe = path
    try:
        args = run_options.to_args(values)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return DataSet(key=key, label=str(entry.get("label", key)), values=values, args=tuple(args),
                   identity=None if "synthetic" in entry else file_digest(path), tasks=tasks,
                   target=None if target is None else float(target), describe=describe), None


def _compared(ds: DataSet, cfg, args: list) -> dict:
    """The Run fields that decide whether an earlier run still stands: the configuration's
    fingerprint and the arguments, with the data file's digest in place of its path."""
    if ds.identity is None:
        return {"fingerprint": cfg.fingerprint(), "hashed_args": tuple(args)}
    return {"fingerprint": replace(cfg, data=ds.identity).fingerprint(),
            "hashed_args": tuple(run_options.to_args({**ds.values, "data": ds.identity}))
            + tuple(args[len(ds.args):])}


def load_plan(path: str, max_ranks: int | None = None) -> Plan:
    """Read, expand and check a sweep file. Every run's options go through the option table
    that 'omtl-mpi run' is built from and are checked as '--np' checks them, so a typo fails
    here rather than in run 37, in one ConfigError line naming the file, the entry and what to
    change."""
    doc = _read_sweep_file(path)
    _unknown(doc, _TOP_KEYS, path)
    name = doc.get("name", os.path.splitext(os.path.basename(path))[0])
    # distinct integers >= 0, or [None]: one run in the file's order
    seeds = _as_list(doc.get("seeds", [None]), f"{path}: seeds")
    for s in seeds:
        if s is not None and (isinstance(s, bool) or not isinstance(s, int) or s < 0):
            raise ConfigError(f"{path}: seeds must be integers >= 0, got {s!r}")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"{path}: seeds repeat ({seeds})")
    default_timeout = _positive(doc.get("timeout", DEFAULT_TIMEOUT), f"{path}: timeout")
    cap = max_ranks if max_ranks is not None else doc.get("max_ranks")   # on every run's ranks
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise ConfigError(f"max_ranks must be an integer >= 1, got {cap!r}")
    data, skipped = _data_sets(doc, path)
    entries = _table(doc, "algorithms", path)
    if not entries:
        raise ConfigError(f"{path}: no algorithms; add an [algorithms.NAME] table (see 'omtl-mpi algos')")
    algorithms, runs = {}, []
    for key, value in entries.items():
        entry = _entry(key, value, default_timeout, f"{path}: algorithms.{key}")
        algorithms[key] = {"label": entry.label, "algo": entry.algo.name}
        runs += _entry_runs(entry, data, seeds, cap)
    ids = [r.id for r in runs]          # two runs of one id would overwrite each other's results
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[0]
        raise ConfigError(f"{path}: two runs would share the id {dup}; rename a data set or algorithm key")
    from ..runtime.launchers.slurm import settings as slurm_settings
    return Plan(name=str(name), path=os.path.abspath(path), data=data, algorithms=algorithms,
                runs=runs, skipped=skipped, slurm=slurm_settings(doc.get("slurm", {}), f"{path}: slurm"))


def _read_sweep_file(path: str) -> dict:
    """The sweep file's TOML document; every way of failing to read it is one ConfigError."""
    if not os.path.lexists(path):
        raise ConfigError(f"sweep file {path} does not exist")
    try:
        # nothing but a regular file is opened: a FIFO would block forever
        regular_file(path, "sweep file")
        with open(path, "rb") as f:
            return tomllib.load(f)
    except UserError as exc:
        raise ConfigError(f"sweep file {exc}") from None
    except OSError as exc:
        raise ConfigError(f"sweep file {path}: cannot read it ({exc.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def _data_sets(doc: dict, path: str) -> tuple[list, list]:
    """The [data.KEY] tables as DataSets, and a notice for each optional one that is missing."""
    base = os.path.dirname(os.path.abspath(path))
    data, skipped = [], []
    for key, entry in _table(doc, "data", path).items():
        ds, notice = _data_set(key, entry, base, f"{path}: data.{key}")
        if ds is not None:
            data.append(ds)
        else:
            skipped.append(notice)
    if not data and not skipped:
        raise ConfigError(f"{path}: no data sets; add a [data.NAME] table with path or synthetic")
    return data, skipped


@dataclass(frozen=True)
class _Entry:
    """One [algorithms.KEY] table, checked: what every run it names shares."""

    key: str
    label: str
    algo: object                # the registry's Algorithm
    ranks: object               # a number or an expression of 'tasks' (rank_count)
    fixed: tuple                # its options as 'omtl-mpi run' arguments
    fixed_values: dict          # the same by name (the option table's)
    fixed_faults: dict          # its fault-injection options
    topologies: list            # [None] where it names none
    axes: dict                  # grid axis -> its values
    timeout: float
    where: str                  # "FILE: algorithms.KEY", to begin its error lines


def _entry(key: str, entry, default_timeout: float, where: str) -> _Entry:
    """Check one [algorithms.KEY] table: its keys, its learner, options, topologies and grid."""
    from ..algorithms.registry import get as get_algo
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be a table")
    _unknown(entry, _ALGO_KEYS, where)
    try:
        algo = get_algo(str(entry.get("algo", key)))
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    options = entry.get("options", {})
    grid = entry.get("grid", {})
    if not isinstance(options, dict) or not isinstance(grid, dict):
        raise ConfigError(f"{where}: options and grid must be tables such as {{ rho = 0.5 }}")
    fixed_values, fixed_faults = {}, {}
    fixed = _option_args(options, where, fixed_values, fixed_faults)
    topologies = _as_list(entry["topology"], f"{where}: topology") if "topology" in entry else [None]
    if topologies != [None] and algo.pattern != "neighbours":
        raise ConfigError(f"{where}: topology applies to the neighbour learners (d-admm, d-psgd), "
                          f"not to {algo.name}")
    axes = {k: _as_list(v, f"{where}: grid.{k}") for k, v in grid.items()}
    timeout = _positive(entry.get("timeout", default_timeout), f"{where}: timeout")
    ranks = entry.get("ranks", "tasks+1" if algo.pattern == "server" else "tasks")
    return _Entry(key=key, label=str(entry.get("label", key)), algo=algo, ranks=ranks,
                  fixed=tuple(fixed), fixed_values=fixed_values, fixed_faults=fixed_faults,
                  topologies=topologies, axes=axes, timeout=timeout, where=where)


def _entry_runs(entry: _Entry, data: list, seeds: list, cap: int | None) -> list:
    """Every run of one entry: data sets x topologies x grid x seeds, in that order."""
    runs = []
    for ds in data:
        ranks = rank_count(entry.ranks, ds.tasks, entry.where)
        ranks = min(ranks, cap) if cap else ranks
        for topology, point, seed in itertools.product(
                entry.topologies, itertools.product(*entry.axes.values()), seeds):
            runs.append(_one_run(entry, ds, ranks, topology, dict(zip(entry.axes, point)), seed))
    return runs


def _one_run(entry: _Entry, ds: DataSet, ranks: int, topology, point: dict, seed) -> Run:
    """One point of the cross product, checked as 'omtl-mpi run --np' would check it."""
    from ..runtime.run import preflight
    algo, where = entry.algo, entry.where
    values, faults = {**ds.values, "algo": algo.name, **entry.fixed_values}, dict(entry.fixed_faults)
    args = list(ds.args) + run_options.to_args({"algo": algo.name}) + list(entry.fixed)
    args += _option_args(point, where, values, faults)
    last = {"topology": None if topology is None else str(topology), "seed": seed}
    values.update(last)
    args += run_options.to_args(last)
    try:
        # the RunConfig 'omtl-mpi run' would build, checked as '--np' checks it
        cfg = run_options.run_config(values)
        _check_faults(faults, _clock_ranks(cfg, algo, ranks, ds.tasks))
        preflight(cfg, ranks, None)
    except UserError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    # a topology names the run only where the entry lists several
    shown = topology if len(entry.topologies) > 1 else None
    rid = _join([ds.key, entry.key, shown] + [f"{k}={_text(v)}" for k, v in point.items()]
                + ([f"s{seed}"] if seed is not None else []))
    return Run(id=rid, data=ds.key, algorithm=entry.key, algo=algo.name, topology=topology,
               shown_topology=shown, grid=point, seed=seed, ranks=ranks, timeout=entry.timeout,
               args=tuple(args), **_compared(ds, cfg, args))


def _clock_ranks(cfg, algo, ranks: int, tasks: int) -> int:
    """The ranks that --slow and --delays may name: the job's, but in one process with --sync
    partial those of its simulated clock, as 'omtl-mpi run' counts them (runtime/run.py): the
    server and its workers (C-ADMM: --nodes, default one per task), or a graph's nodes."""
    if ranks != 1 or cfg.sync != "partial" or algo.pattern == "none":
        return ranks
    nodes = cfg.nodes or tasks
    return nodes + 1 if algo.pattern == "server" else nodes


def _positive(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"{where} must be a number of seconds > 0, got {value!r}")
    return float(value)
