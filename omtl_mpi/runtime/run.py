"""Run one learner on one data set: set-up and validation on every rank, the rounds, and the
collection of results on rank 0 (:func:`run`, in three steps: :func:`set_up`, :func:`learn`,
:func:`collect`)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..algorithms import registry
from ..comm.clock import PhaseClock
from ..config import MAX_DELAY, RunConfig
from ..data.features import model_dim
from ..data.footprint import chunk_rows as _chunk_rows
from ..data.rounds import RoundLayout, round_instances, rounds_needed
from ..errors import UserError
from ..fast import addresses
from ..memory import size_text
from ..paths import output_file
from . import checkpoint as ckpt
from .faults import NEVER
from ..engine.placement import check_none_world, check_star_world, graph_nodes, placement
from .progress import Progress
from ..engine import Engine, build
from ..engine.schedule import CHECK_EVERY, Hooks
from ..engine.partial import Partial
from ..engine.stragglers import Stragglers
from .world import SetupFailed, collective, default_world
from .collect import _chunks, collect  # noqa: F401  (collect: the run's last phase, here too)


def make_source(cfg: RunConfig):
    """The data source named by the configuration (a task-stream file or the synthetic family)."""
    from ..data.source import FileSource, SyntheticSource
    if cfg.data == "synthetic":
        return SyntheticSource(tasks=cfg.synth_tasks, samples=cfg.synth_samples,
                               seed=cfg.synth_seed, normalize=cfg.synth_normalize)
    return FileSource(cfg.data)


def row_format(meta, cfg: RunConfig):
    """What the learners' messages need to know of the run's instances (the most non-zero
    features of one, the intercept's included, and the mini-batch), the same on every rank."""
    from ..data.sparse import RowFormat
    return RowFormat(nonzeros=int(meta.max_row_nnz or meta.dim) + int(bool(cfg.intercept)),
                     batch=cfg.batch)


def _check(cfg: RunConfig, source, size: int, out: str | None):
    """Everything checkable before any task data is read: algorithm, data structure, world size,
    topology, results folder. Raises UserError."""
    algo = registry.get(cfg.algo)
    if not isinstance(cfg.params, algo.params):
        raise SetupFailed(f"{algo.name} takes {algo.params.__name__} hyper-parameters")
    meta = source.meta()
    longest = int(meta.lengths.max())
    if cfg.batch > longest:
        # the rounds are padded to the batch: a batch past the longest stream only allocates
        raise SetupFailed(f"--batch {cfg.batch} is more than the longest stream ({longest} "
                          f"instances): one round would hold them all; use --batch {longest} or less")
    topology = None
    if algo.pattern == "server":
        check_star_world(size, meta.n_tasks, algo.name)
    elif algo.pattern == "none":
        check_none_world(size, meta.n_tasks, algo.name)
    else:
        from ..topology import load_topology
        topology = load_topology(cfg.topology, graph_nodes(size, meta.n_tasks, algo, cfg.nodes))
    if cfg.sync == "partial" and algo.pattern != "none":
        _check_partial(cfg, algo, meta, size)
    nodes = topology.n_nodes if topology is not None else _workers(cfg, meta, size, algo.pattern)
    _check_memory(cfg, meta, size, algo.pattern, nodes)
    if out is not None:                 # '' or 0 is a bad name, not "no results file"
        output_file(out, "--out")
    return algo, meta, topology


def _workers(cfg: RunConfig, meta, size: int, pattern: str) -> int | None:
    """The workers of C-ADMM's --sync partial in one process (--nodes, default one per task);
    None otherwise (under MPI every worker is a rank; a graph's nodes are the topology's)."""
    if pattern != "server" or cfg.sync != "partial" or size > 1:
        return None
    return cfg.nodes or meta.n_tasks


def _check_partial(cfg: RunConfig, algo, meta, size: int) -> None:
    """--sync partial: a learner whose messages fold (C-ADMM) or whose nodes can mix with older
    tables (D-ADMM), workers that exist, S of them at most."""
    K, d = meta.n_tasks, model_dim(meta.dim, cfg.intercept)
    server = algo.pattern == "server"
    merges = getattr(algo.worker if server else algo.node, "merges", None)
    why = (merges(cfg.params.resolved(1), K, d, row_format(meta, cfg)) if merges is not None
           else "its server takes every worker's message of the same round" if server
           else "its nodes average their neighbours' models of the same round")
    if isinstance(why, str):
        raise SetupFailed(f"{algo.name} cannot run with --sync partial: {why}")
    if not server:
        return
    if size > 1 and cfg.nodes is not None:
        raise SetupFailed(f"--nodes {cfg.nodes} is for --sync partial in one process; under MPI "
                          f"every worker is a rank ({size - 1} here): leave out --nodes")
    W = size - 1 if size > 1 else cfg.nodes or K
    if W > K:
        raise SetupFailed(f"{algo.name} with {K} tasks has at most {K} workers (each holds at "
                          f"least one task), but --nodes {W} were asked for: use {K} or fewer")
    if cfg.min_workers is not None and cfg.min_workers > W:
        raise SetupFailed(f"--min-workers {cfg.min_workers} is more than the run's {W} workers; "
                          f"use {W} or fewer")


def _check_memory(cfg: RunConfig, meta, size: int, pattern: str, n_nodes: int | None) -> None:
    """The streams one rank holds, laid out in rounds, and the learner's own arrays
    (:func:`check_model_memory`) must fit in this machine's memory."""
    from ..data.footprint import available_memory, rank_streams_bytes
    free = available_memory()
    if free is None:
        return
    K, d = meta.n_tasks, model_dim(meta.dim, cfg.intercept)
    blocks = placement(K, size, pattern, n_nodes)[1]
    need, lengths = rank_streams_bytes(meta, blocks, cfg.batch, d, cfg.intercept)
    if need > free:
        raise SetupFailed(f"the streams one rank holds ({len(lengths)} task(s), "
                          f"{int(lengths.sum())} instances, d = {d}) need about {size_text(need)} "
                          f"laid out in rounds, more than the {size_text(free)} of memory "
                          "available: use fewer or shorter streams, or more ranks (or nodes) so "
                          "that each holds fewer tasks")
    check_model_memory(cfg, K, d, size, pattern, n_nodes, row_format(meta, cfg))


def model_bytes(cfg: RunConfig, K: int, d: int, size: int, pattern: str,
                n_nodes: int | None = None, rows=None) -> list:
    """What the chosen learner keeps on the rank that holds the most, as its registry entry
    says (a list of :class:`~omtl_mpi.algorithms.footprint.Part`: bytes, what, the fix);
    ``rows``, the run's RowFormat, sizes C-ADMM's messages of entries (None: every coordinate)."""
    from ..algorithms.footprint import Held
    algo = registry.get(cfg.algo)
    everyone, blocks = placement(K, size, pattern, n_nodes)
    held = Held(name=algo.name, pattern=algo.pattern, n_tasks=K, dim=d,
                tasks=max((sum(b - a for a, b in rank) for rank in blocks), default=0),
                blocks=max((len(rank) for rank in blocks), default=0),
                worker_blocks=everyone if pattern == "server" else [],
                nodes=n_nodes or (size if size > 1 else K), rows=rows,
                asynchronous=cfg.sync == "partial")
    return algo.footprint(cfg.params, held)


def check_model_memory(cfg: RunConfig, K: int, d: int, size: int, pattern: str,
                       n_nodes: int | None = None, rows=None) -> None:
    """The learner's own arrays (:func:`model_bytes`) must fit in this machine's memory, before
    any is allocated. Raises SetupFailed naming the largest part and what to change."""
    from ..data.footprint import available_memory
    free = available_memory()
    if free is None:
        return
    parts = model_bytes(cfg, K, d, size, pattern, n_nodes, rows)
    need = sum(part.bytes for part in parts)
    if need <= free:
        return
    largest = max(parts)
    raise SetupFailed(f"{largest.what} need about {size_text(largest.bytes)} ({size_text(need)} "
                      f"in all), more than the {size_text(free)} of memory available: {largest.fix}")


def preflight(cfg: RunConfig, n_ranks: int, out: str | None) -> None:
    """The checks of a run on ``n_ranks`` ranks, made before mpiexec is started (``--np``)."""
    _check(cfg, make_source(cfg), n_ranks, out)


def run(cfg: RunConfig, *, out: str | None = None, world=None, progress: bool = False,
        notice=None, fault=None, checkpoint_every: int = 0, checkpoint_path: str | None = None,
        resume: str | None = None, source=None, stragglers=None,
        schedule=None) -> dict | None:
    """Run ``cfg`` on this process's world; return the report on rank 0 (None elsewhere). Raises
    SetupFailed on every rank when any rank found a user error before learning started.

    Parameters
    ----------
    cfg : RunConfig
    out : str, optional
        Results file (HDF5) written by rank 0.
    world : LocalWorld or MpiWorld, optional
        Injected communicator wrapper; by default COMM_WORLD under MPI, else one process.
    progress : bool
        Show a progress bar on rank 0's stderr.
    notice : callable, optional
        Called on rank 0 with each notice about the data (e.g. labels mapped from {0, 1}).
    fault : callable, optional
        ``fault(rank)`` gives this rank's :class:`~omtl_mpi.runtime.faults.Fault` (--fail-at).
    checkpoint_every, checkpoint_path : int, str
        Write the full state of every rank to ``checkpoint_path`` every so many rounds.
    resume : str, optional
        Continue from this checkpoint (same configuration, data and number of ranks).
    source : optional
        Where the tasks come from (``meta()``, ``load(indices)``, ``describe()``, as
        :mod:`omtl_mpi.data.source`'s); by default the one ``cfg.data`` names (the Python API
        passes arrays this way).
    stragglers : Stragglers, optional
        The ranks slowed on purpose (--slow, --delays: :mod:`omtl_mpi.engine.stragglers`).
    schedule : (taken, used), optional
        --sync partial in one process: run this schedule (--replay), not the simulated one.
    """
    job = set_up(cfg, world if world is not None else default_world(), out=out, notice=notice,
                 fault=fault, resume=resume, source=source, stragglers=stragglers,
                 schedule=schedule)
    save = (checkpoint_every, lambda done: _save_checkpoint(job, checkpoint_path, done))
    learn(job, progress, save if checkpoint_every else None)
    return collect(job, out)


@dataclass
class Job:
    """Everything :func:`set_up` prepared on this rank, and what :func:`learn` measured."""

    cfg: RunConfig
    world: object
    source: object
    algo: object
    meta: object
    dim: int                    # weights per task: the data's features, and the intercept's
    topology: object
    params: object
    rounds: int
    batches: list
    roles: Engine
    clock: PhaseClock
    fault: object
    stragglers: Stragglers = field(default_factory=Stragglers)
    delay: object = None        # this rank's Delay, or None
    layouts: set = field(default_factory=set)   # every rank's address randomisation (--aslr)
    first_round: int = 0
    preds: list = field(default_factory=list)
    seconds: float = 0.0
    finished: float = 0.0
    cpu_seconds: float = 0.0
    learning_started: float = 0.0
    started_at: float = 0.0     # perf_counter() when the rounds started
    hosts: tuple = ()           # every rank's host, its shared-memory group, the MPI library


def set_up(cfg: RunConfig, world, *, out=None, notice=None, fault=None, resume=None,
           source=None, stragglers=None, schedule=None) -> Job:
    """Check the configuration on every rank, agree on it, load this rank's tasks, build its
    roles and their exchange, and restore a checkpoint; return this rank's :class:`Job`, ready
    for :func:`learn`. Collective. The arguments are :func:`run`'s (``world``: a LocalWorld or
    an MpiWorld); raises SetupFailed on every rank when any rank found a user error."""
    rank, size = world.rank, world.size
    source = make_source(cfg) if source is None else source
    algo, meta, topology = collective(world, lambda: _check(cfg, source, size, out if rank == 0 else None))
    K, d = meta.n_tasks, model_dim(meta.dim, cfg.intercept)
    switched = algo.notice(cfg.params, d)
    if switched and rank == 0 and notice is not None:
        notice(switched)
    T = rounds_needed(meta.lengths, cfg.batch)
    params = cfg.params.resolved(T)
    # Every rank must run the same configuration on the same data: compare before learning.
    signature = (cfg.fingerprint(), meta.names, tuple(int(n) for n in meta.lengths), meta.dim)
    if len(set(world.agree(signature))) > 1:
        raise SetupFailed("ranks disagree on the configuration or the data set (different files, "
                          "options or versions on different nodes?); start every rank with the "
                          "same command and data")

    my_fault = fault(rank) if fault else NEVER
    my_fault.check_world(size)          # the same on every rank: every rank stops with it
    stragglers = stragglers if stragglers is not None else Stragglers()
    workers = _workers(cfg, meta, size, algo.pattern)
    # in one process --sync partial's workers are ranks 1..W of the simulated clock, and a
    # graph's nodes ranks 0..N-1
    simulated = (workers + 1 if workers else topology.n_nodes
                 if cfg.sync == "partial" and size == 1 and topology is not None else size)
    stragglers.check_world(simulated)
    partial = None
    if cfg.sync == "partial":
        W = workers or size - 1
        partial = Partial(cfg.min_workers or max(1, W // 2),
                          MAX_DELAY if cfg.max_delay is None else cfg.max_delay, stragglers,
                          schedule, T)
    roles = build(algo, params, K, d, topology=topology, world=world, rows=row_format(meta, cfg),
                  nodes=workers, partial=partial)
    batches = _load_batches(cfg, world, source, roles.local, T, d, notice, my_fault)
    job = Job(cfg, world, source, algo, meta, d, topology, params, T, batches, roles,
              PhaseClock(T, size), my_fault, stragglers,
              # the simulated clock of --sync partial in one process does not sleep
              None if partial is not None and size == 1 else stragglers.delay(rank, T),
              layouts=set(world.agree(addresses.randomised())), hosts=world.hosts())
    if rank == 0 and notice is not None:
        line = _one_host_notice(job.hosts[0])
        if line:
            notice(line)
    if resume:
        _resume(job, resume, notice)
    return job


def _one_host_notice(hosts: list) -> str | None:
    """A job meant for several hosts whose ranks all run on one: given several nodes by Slurm
    (SLURM_JOB_NUM_NODES), or started by hydra with a host file naming several hosts
    (HYDRA_HOST_FILE, which mpiexec reads from the environment that its ranks inherit)."""
    import os
    if len(hosts) < 2 or len(set(hosts)) > 1:
        return None
    try:
        nodes = int(os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES") or 1)
    except ValueError:
        nodes = 1
    if nodes > 1:
        return (f"the job was given {nodes} nodes, but all {len(hosts)} ranks run on {hosts[0]}: "
                "start them with srun (or mpiexec with a host list) to spread them")
    path = os.environ.get("HYDRA_HOST_FILE", "")
    try:
        with open(path) as f:       # lines "host[:ranks]", comments after '#'
            named = {line.split("#")[0].split(":")[0].strip() for line in f} - {""}
    except (OSError, UnicodeDecodeError):
        return None
    if len(named) > 1:
        return (f"the host file {path} (HYDRA_HOST_FILE) names {len(named)} hosts, but all "
                f"{len(hosts)} ranks run on {hosts[0]}: check mpiexec's launcher (-launcher "
                "ssh) and that the names are different machines")
    return None


def _load_batches(cfg, world, source, local, T, d, notice, fault) -> list:
    """This rank's tasks, presented in the run's order (seeded shuffle, scaling) and laid out
    round by round over each round's active tasks (one layout per block), read a chunk of
    tasks at a time so that a rank never holds its streams twice."""
    from ..data.source import block_of, presented

    meta = source.meta()

    def load():
        layouts, notices = [], []
        for a, b in local:
            layout = RoundLayout(meta.lengths[a:b], cfg.batch, T, d, sparse=meta.sparse)
            for c0, c1 in _chunks(meta.lengths, a, b, _chunk_rows(meta)):
                X, y, lengths, found = block_of(source, c0, c1)
                notices += found
                X, y = presented(X, y, lengths, c0, cfg.seed, cfg.scale)
                layout.fill(c0 - a, X, y, lengths)
            if cfg.intercept:
                layout.set_column(d - 1, 1.0)
            layouts.append(layout)
        return layouts, notices
    layouts, notices = collective(world, load)
    fault.check("load")
    notices = world.agree(notices)
    if world.rank == 0 and notice is not None:
        for line in dict.fromkeys(n for ns in notices for n in ns):
            notice(line)
    return layouts


def _resume(job: Job, path: str, notice) -> None:
    """Every rank's state, predictions and clock as the checkpoint ``path`` holds them: rank 0
    reads the file, every rank checks its own part against its learner before anything is
    restored, each check through :func:`collective`, so that a bad file is one line on every
    rank, not a crash on one. Collective."""
    world, rank = job.world, job.world.rank

    loaded = collective(world, lambda: ckpt.read(path, job.cfg, job.meta, job.source,
                                                 world.size, job.rounds) if rank == 0 else None)
    parts = [(loaded.done, s) for s in loaded.states] if rank == 0 else None
    done, saved = world.scatter_objects(parts)
    collective(world, lambda: ckpt.check_part(path, rank, saved,
                                              _checkpoint_part(job, expected=True)))
    # the structure first (its message says which array differs), then the values' digest
    collective(world, lambda: loaded.verify() if rank == 0 else None)
    collective(world, lambda: _restore(job, path, saved))
    job.first_round = done
    if notice is not None and rank == 0:
        notice(f"resumed from {path} after round {job.first_round}")


def _checkpoint_part(job: Job, expected: bool = False) -> dict:
    """This rank's part of a checkpoint: its roles' state, predictions so far, staleness and
    clock; with ``expected``, what a checkpoint's part must look like for this run (the
    predictions and staleness are not made until the rounds start)."""
    roles = job.roles
    preds, staleness = roles.preds, roles.staleness
    if expected:
        preds = [ckpt.Expect((b.n_slots,), "b") for b in job.batches]
        staleness = ckpt.Expect((len(roles.holders), job.clock.rows.shape[0]), "f")
    return {"state": roles.state(), "preds": preds, "staleness": staleness, "clock": job.clock.rows}


def _restore(job: Job, path: str, saved: dict) -> None:
    """Load a checked checkpoint part into this rank's roles and clock."""
    roles = job.roles
    try:
        roles.load_state(saved["state"])
    except KeyError as exc:         # a checkpoint of an older version, without an array
        raise UserError(f"--resume {path}: rank {job.world.rank}'s state lacks {exc}, which "
                        "this version needs; start the run afresh") from None
    roles.preds = [np.array(p, dtype=bool) for p in saved["preds"]]
    roles.staleness = saved["staleness"]
    job.clock.rows[:] = saved["clock"]


def _save_checkpoint(job: Job, path: str, done: int) -> None:
    """Gather every rank's state on rank 0 and write it to ``path`` (collective). The data
    set's digest is computed on rank 0 only, once per run (it is cached)."""
    everything = job.world.gather_objects(_checkpoint_part(job))
    if job.world.rank == 0:
        ckpt.write(path, done, everything, job.cfg, job.meta, job.source)
    # the other ranks wait for the write here, where a wait has no limit (comm.waiting)
    job.world.barrier()


def learn(job: Job, progress: bool = False, checkpoint=None) -> None:
    """Run the rounds of ``job`` (from :func:`set_up`) after the checkpoint (all of them
    without one) and time them: the job gets the predictions, the wall seconds and this rank's
    CPU seconds. ``progress``: a progress bar on rank 0; ``checkpoint``: ``(every, save)``,
    ``save(t)`` after every ``every``-th round, on every rank."""
    bar = Progress(job.rounds, enabled=progress and job.world.rank == 0)
    check = lambda done: _check_finite(job, done)     # noqa: E731
    # asynchronous ranks are at different rounds: their one collective check is at the end
    partial = job.roles.partial is not None
    hooks = Hooks(progress=bar, fault=job.fault, checkpoint=checkpoint,
                  check=None if partial else check, delay=job.delay)
    job.world.barrier()
    job.learning_started = time.time()
    cpu0 = time.process_time()          # user and system CPU seconds
    t0 = job.started_at = time.perf_counter()
    # a step that overflows is found by the finiteness check, which names the round and the
    # likely cause: numpy's warnings would only add noise before it
    with np.errstate(all="ignore"):
        job.preds, _ = job.roles.run(job.batches, job.clock, hooks, first_round=job.first_round,
                                     instances=round_instances(job.meta.lengths, job.cfg.batch,
                                                               job.rounds))
    job.seconds = time.perf_counter() - t0
    # when this rank's last round ended, its stream's end: before the waits that close the loop
    # (an asynchronous node's neighbours' last tables, a worker's last replies), which would
    # make a fast worker's end its slowest peer's
    last = job.clock.started[-1]
    job.finished = min(last + job.clock.rows[-1].sum() - t0, job.seconds) if last else job.seconds
    if partial:
        check(job.rounds)
    # with more ranks than cores, a rank that yields while it waits still counts CPU time, so
    # the report shows what the job took from the machine, not only how long it lasted
    job.cpu_seconds = time.process_time() - cpu0
    job.roles.close()


def _check_finite(job: Job, done: int) -> None:
    """Stop every rank, with one line, if any rank's model holds NaN or inf (collective)."""
    if all(job.world.agree(job.roles.finite())):
        return
    # the options of this learner that usually make the steps too large, as they are spelled
    causes = [text for name, text in _DIVERGES if hasattr(job.params, name)]
    raise SetupFailed(
        f"the model went non-finite (NaN or inf) by round {done} (checked every {CHECK_EVERY} "
        f"rounds and before every checkpoint): its steps grew without bound. Usual causes: "
        f"{', '.join(causes + ['features of a very large scale (try --scale online)'])}; no "
        "results were written")


# hyper-parameters whose value can make a learner's steps grow without bound
_DIVERGES = (("eta", "a small --eta"), ("class_weight", "a large --class-weight"),
             ("rho", "a large --rho"), ("lambda4", "a large --lambda4"),
             ("gamma0", "a large --gamma0"), ("C", "a large --C"))
