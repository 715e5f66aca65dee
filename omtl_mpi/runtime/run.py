"""Run one learner on one data set: setup and validation on every rank, rounds, results on rank 0."""
from __future__ import annotations

import resource
from time import perf_counter

import numpy as np

from .. import metrics
from ..algorithms import registry
from ..comm.clock import PhaseClock
from ..comm.local import LocalStar
from ..config import RunConfig
from ..data.rounds import RoundBatches, rounds_needed
from ..errors import ConfigError
from . import checkpoint as ckpt
from . import addresses, fused as fused_loops, placement, transport as transports
from .graph import run_graph
from .layout import check_none_world, check_star_world, graph_nodes, task_blocks
from .progress import Progress
from .faults import NEVER
from .results import check_writable, write_results
from .star import run_star
from .world import SetupFailed, collective, default_world


def make_source(cfg: RunConfig):
    """The data source named by the configuration (a task-stream file or the synthetic family)."""
    from ..data.source import FileSource, SyntheticSource
    if cfg.data == "synthetic":
        return SyntheticSource(tasks=cfg.synth_tasks, samples=cfg.synth_samples,
                               seed=cfg.synth_seed, normalize=cfg.synth_normalize)
    return FileSource(cfg.data)


def _check(cfg: RunConfig, source, size: int, out: str | None):
    """Everything checkable before any task data is read: algorithm, data structure, world size,
    topology, results folder. Raises UserError."""
    algo = registry.get(cfg.algo)
    if not isinstance(cfg.params, algo.params):
        raise SetupFailed(f"{algo.name} takes {algo.params.__name__} hyper-parameters")
    meta = source.meta()
    topology = None
    if algo.pattern == "server":
        check_star_world(size, meta.n_tasks, algo.name)
    elif algo.pattern == "none":
        check_none_world(size, meta.n_tasks, algo.name)
    else:
        from ..topology import load_topology
        topology = load_topology(cfg.topology, graph_nodes(size, meta.n_tasks, algo, cfg.nodes))
    _check_memory(cfg, meta, size, algo.pattern)
    if out:
        check_writable(out)
    return algo, meta, topology


def _ranks_per_cpu(world) -> float:
    """Ranks per usable CPU on the job's busiest node (1 or less: a core each). Collective."""
    _, masks = world.node_peers(placement.cpu_mask())
    cpus = set().union(*map(set, masks))
    return max(world.agree(len(masks) / max(len(cpus), 1)))


def _load_kernels(fused: bool = False) -> None:
    from ..algorithms import kernels
    try:
        if fused:
            fused_loops.load()
        else:
            kernels.load()
    except Exception as exc:        # numba missing or broken, or no writable cache folder
        raise ConfigError(f"--kernel numba: the compiled steps did not load ({type(exc).__name__}: "
                          f"{exc}); use --kernel numpy") from exc


def _load_compiled(world, fused: bool = False) -> None:
    """Load the compiled steps (or the fused loops) on every rank: after a change to their
    files numba compiles them (seconds), so unless every rank finds them loaded before from
    these sources (kernels.cache_ready), rank 0 loads first, compiling if it must, while the
    others wait without spinning; then every rank loads them from numba's cache. Collective."""
    from ..algorithms import kernels
    rank = world.rank
    if not all(world.agree(kernels.cache_ready("fused" if fused else "kernels"))):
        collective(world, lambda: _load_kernels(fused) if rank == 0 else None)
        world.barrier()
    collective(world, lambda: _load_kernels(fused))


def _check_memory(cfg: RunConfig, meta, size: int, pattern: str) -> None:
    """The learner's own matrices must fit in this machine's memory (the task data's own check
    is taskfile's): a K x K Omega with the copies its update makes, and AROW's d x d per task
    on the rank that holds the most tasks."""
    from ..data.taskfile import available_memory
    free = available_memory()
    if free is None:
        return
    gib = 2 ** 30
    K, d = meta.n_tasks, meta.dim
    if hasattr(cfg.params, "omega_eps"):
        need = 6 * K * K * 8        # Omega, its eigenvectors, V^T V, the inverse, work arrays
        if need > free:
            raise SetupFailed(f"{K} tasks need a {K} x {K} task-relationship matrix: about "
                              f"{need / gib:.1f} GiB while it is updated, more than the "
                              f"{free / gib:.1f} GiB of memory available; use fewer tasks, or a "
                              "learner without Omega (admm-single, pa, pooled)")
    if getattr(cfg.params, "w_step", None) == "arow" or cfg.algo == "arow":
        holders = max(size - 1, 1) if pattern == "server" else size
        most = -(-K // holders)
        need = 2 * most * d * d * 8     # the matrices, and their checkpoint copy
        # against the whole machine's memory: ranks of a cluster job may each have a node's worth
        if need > free:
            raise SetupFailed(f"AROW keeps a {d} x {d} matrix per task: {most} task(s) on one "
                              f"rank need about {need / gib:.1f} GiB, more than the "
                              f"{free / gib:.1f} GiB of memory available; reduce d (import with a "
                              "smaller --dims), spread the tasks over more ranks, or use --w-step "
                              "adagrad (d numbers per task)")


def preflight(cfg: RunConfig, n_ranks: int, out: str | None) -> None:
    """The checks of a run on ``n_ranks`` ranks, made before mpiexec is started (``--np``)."""
    _check(cfg, make_source(cfg), n_ranks, out)


def run(cfg: RunConfig, *, out: str | None = None, world=None, progress: bool = False,
        notice=None, fault=None, checkpoint_every: int = 0, checkpoint_path: str | None = None,
        resume: str | None = None, bind: str = "auto", transport: str = "auto") -> dict | None:
    """Run ``cfg`` on this process's world; return the report on rank 0 (None elsewhere).

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
    bind : {"auto", "none"}
        Pin ranks to CPUs on nodes with more ranks than CPUs (:mod:`.placement`), or leave
        placement to the operating system.
    transport : {"auto", "mpi", "shm"}
        How the per-round messages travel (:mod:`.transport`): MPI, or one node's shared
        memory with ranks that sleep while they wait; auto picks shared memory when every rank
        is on one node and there are more ranks than CPUs.

    Raises
    ------
    SetupFailed
        On every rank, when any rank found a user error before learning started.
    """
    if bind not in placement.MODES:
        raise ConfigError(f"--bind must be one of {', '.join(placement.MODES)}, got {bind!r}")
    if transport not in transports.MODES:
        raise ConfigError(f"--transport must be one of {', '.join(transports.MODES)}, got {transport!r}")
    world = world if world is not None else default_world()
    rank, size = world.rank, world.size
    source = make_source(cfg)
    algo, meta, topology = collective(world, lambda: _check(cfg, source, size, out if rank == 0 else None))
    K, d, B = meta.n_tasks, meta.dim, cfg.batch
    T = rounds_needed(meta.lengths, B)
    # collective, so on every rank before anything that depends on the configuration: ranks
    # started with different learners must reach the agreement below, not hang here
    sharing = _ranks_per_cpu(world)
    if hasattr(cfg.params, "kernel"):
        params = cfg.params.resolved(T, ranks_per_cpu=sharing)
    else:
        params = cfg.params.resolved(T)
    kernel = getattr(params, "kernel", None)
    # Every rank must run the same configuration on the same data: compare before learning
    # (the kernel too: --kernel auto depends on numba being installed where the rank runs).
    signature = (cfg.fingerprint(), meta.names, tuple(int(n) for n in meta.lengths), meta.dim, bind,
                 transport, kernel)
    if len(set(world.agree(signature))) > 1:
        raise SetupFailed("ranks disagree on the configuration or the data set (different files, "
                          "options, versions or installed packages, such as numba for --kernel "
                          "auto, on different nodes?); start every rank with the same command "
                          "and data")
    if kernel == "numba":
        _load_compiled(world)

    # -- who holds what: blocks of tasks, and which of them live on this rank -----------------
    if algo.pattern == "server":
        blocks = task_blocks(K, max(size - 1, 1))
        local = blocks if size == 1 else ([] if rank == 0 else [blocks[rank - 1]])
    else:
        blocks = task_blocks(K, topology.n_nodes if topology is not None else size)
        local = blocks if size == 1 else [blocks[rank]]
    mine = np.arange(local[0][0], local[-1][1]) if local else np.arange(0)
    from ..data.source import shuffled
    streams = collective(world, lambda: shuffled(source.load(mine), cfg.seed) if len(mine) else None)
    my_fault = fault(rank) if fault else NEVER
    my_fault.check("load")
    notices = world.agree(list(streams.notices) if streams is not None else [])
    if rank == 0 and notice is not None:
        for line in dict.fromkeys(n for ns in notices for n in ns):
            notice(line)
    batches = []
    for a, b in local:
        i, j = a - local[0][0], b - local[0][0]
        batches.append(RoundBatches(streams.X[i:j], streams.y[i:j], B, T, d))
    del streams

    clock = PhaseClock(T)
    bar = Progress(T, enabled=progress and rank == 0)
    kind = collective(world, lambda: transports.choose(world, transport))
    roles = Roles(algo, params, K, d, blocks, local, rank, size, topology, world, kind,
                  fallback=transport == "auto")
    # the fused loops and the Python ones ring each other's bells differently: all or none
    if len(set(world.agree(roles.fused))) > 1:
        raise SetupFailed(f"ranks disagree on fusing the rounds ({fused_loops.ENVIRONMENT} "
                          "set differently?); start every rank with the same environment")
    if roles.fused:
        _load_compiled(world, fused=True)
    cpus = world.agree(placement.bind(world, bind, getattr(roles.server, "cpu_weight", 1.0),
                                      polling=roles.transport == "mpi"))
    layouts = set(world.agree(addresses.randomised()))
    first_round = 0
    signature_json = ckpt.signature_of(meta)
    if resume:
        def restore():
            if rank == 0:
                return ckpt.read(resume, config=cfg.to_json(), fingerprint=cfg.fingerprint(),
                                 signature=signature_json,
                                 ranks=size)
            return None
        loaded = collective(world, restore)
        done, states = loaded if rank == 0 else (None, None)
        mine_state = world.scatter_objects([(done, s) for s in states] if rank == 0 else None)
        first_round, saved = mine_state
        roles.load_state(saved["state"])
        # predictions so far, True for +1 (a checkpoint of an older version holds -1/+1)
        roles.preds = [np.asarray(p) > 0 for p in saved["preds"]]
        roles.staleness = saved["staleness"]
        clock.rows[:] = saved["clock"]
        if notice is not None and rank == 0:
            notice(f"resumed from {resume} after round {first_round}")
    hook = None
    if checkpoint_every:
        def save(done):
            local = {"state": roles.state(), "preds": roles.preds, "staleness": roles.staleness,
                     "clock": clock.rows}
            everything = world.gather_objects(local)
            if rank == 0:
                ckpt.write(checkpoint_path, done, everything, config=cfg.to_json(),
                           fingerprint=cfg.fingerprint(), signature=signature_json)
        hook = (checkpoint_every, save)
    world.barrier()
    cpu0 = _cpu_seconds()
    t0 = perf_counter()
    preds, staleness = roles.run(batches, clock, bar, first_round=first_round,
                                 fault=my_fault, checkpoint=hook)
    seconds = perf_counter() - t0
    # what each rank used of the CPU meanwhile: with more ranks than cores, a rank that polls
    # while it waits uses CPU that the rank with work needed (docs/PERFORMANCE.md)
    cpu = _cpu_seconds() - cpu0
    roles.close()
    holders = roles.holders
    extras = {}
    if algo.pattern != "server":
        if topology is not None:
            extras["staleness"] = staleness
        node_arrays = [h.node_arrays() for h in holders]
        for key in (node_arrays[0] if node_arrays else {}):
            extras[f"node_{key}"] = np.stack([na[key] for na in node_arrays])
    server = roles.server

    # -- collect on rank 0, in task order (ranks hold contiguous blocks in rank order) -------
    if rank != 0 or not out:
        my_fault.check("write")             # rank 0 with a results file fails inside the write
    gathered = _gather(world, holders, preds, batches, extras, T, B, d)
    timing = world.gather_rows(clock.rows[None], [1] * size)
    # peak resident memory of every rank (Linux reports KiB): shows that a worker holds only
    # its own tasks
    cpu_seconds = world.gather_rows(np.array([cpu]), [1] * size)
    peak_rss = world.gather_rows(
        np.array([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0]), [1] * size)
    role_names = world.agree(_role(rank, size, algo.pattern, local))
    if rank != 0:
        return None

    summary = metrics.summarise(gathered["mistakes"], meta.lengths, B, gathered["confusion"])
    report = {
        "algo": algo.name, "variant": getattr(params, "variant", "-"),
        "loss": getattr(params, "loss", "hinge"), "relationship": getattr(params, "relationship", False),
        "data": source.describe(), "tasks": K, "dim": d, "ranks": size, "rounds": T, "batch": B,
        "seed": cfg.seed,
        "mean_error": summary["mean_error"],
        "per_task_error": summary["per_task_error"].tolist(),
        "balanced_error": summary["balanced_error"], "f1": summary["f1"],
        # the rounds this invocation ran (all of them, or those after the checkpoint)
        "seconds": seconds, "ms_per_round": 1000.0 * seconds / max(T - first_round, 1),
        "task_names": list(meta.names), "eta": getattr(params, "eta", None), "kernel": kernel,
        "cpus": None if all(c is None for c in cpus) else [-1 if c is None else c for c in cpus],
        "transport": roles.transport,
        # whole rounds in compiled code (runtime/fused.py), or the Python round loop
        "loop": "fused" if roles.fused else "python",
        "cpu_ms_per_round": (1000.0 * cpu_seconds / max(T - first_round, 1)).tolist(),
        # address-space layout randomisation of the ranks (--aslr): on, off, mixed or unknown
        "aslr": ("unknown" if None in layouts else "mixed" if len(layouts) > 1
                 else "on" if layouts == {True} else "off"),
    }
    if topology is not None:
        report["topology"] = topology.name
        report["nodes"] = topology.n_nodes
        report["mean_staleness"] = float(gathered["staleness"].mean()) if T else 0.0
    if out:
        model = {k: gathered[k] for k in ("W", "Z", "V", "U") if k in gathered}
        if algo.pattern == "server":
            model.update(server.global_arrays())
        for key in gathered:
            if key.startswith("node_"):
                model[key] = gathered[key]
        if "node_omega" in gathered:        # every node has its own Omega; node 0's is "the" Omega
            model["omega"] = gathered["node_omega"][0]
            model["u"] = gathered["node_u"][0]
        summary["mistakes"] = gathered["mistakes"]
        summary["confusion"] = gathered["confusion"]
        write_results(out, attrs={k: v for k, v in report.items()
                                  if isinstance(v, (int, float, str, bool))},
                      config=cfg.to_dict(), names=meta.names, lengths=meta.lengths,
                      metrics=summary, model=model, predictions=gathered["predictions"],
                      timing=timing, roles=role_names, staleness=gathered.get("staleness"),
                      peak_rss=peak_rss, cpus=report["cpus"], cpu_seconds=cpu_seconds,
                      before_rename=lambda: my_fault.check("write"))
        report["results"] = out
    report["_timing"] = timing
    report["_roles"] = role_names
    report["peak_rss_mib"] = peak_rss.tolist()
    return report


class Roles:
    """This rank's learner objects and the communicator that joins them, for any pattern.

    Parameters
    ----------
    blocks : list of (start, stop)
        Every task holder's block (workers of a star, or nodes).
    local : list of (start, stop)
        The blocks held by this rank (all of them in one process).
    """

    def __init__(self, algo, params, K, d, blocks, local, rank, size, topology, world=None,
                 transport: str = "mpi", fallback: bool = False):
        self.algo, self.server, self.holders = algo, None, []
        self.preds = self.staleness = None        # what the rounds so far produced
        self.transport = "local" if size == 1 else transport
        self._policy = None
        self.fused = False
        if algo.pattern == "server":
            if local:
                self.holders = [algo.worker(params, *local[0], d, K)]
            if rank == 0:
                self.server = algo.server(params, K, d, blocks)
            if size == 1:
                self.comm = LocalStar()
            else:
                up = [0] + [algo.worker.up_size(b - a, d) for a, b in blocks]
                down = [0] + [algo.worker.down_size(b - a, d) for a, b in blocks]
                worker = self.holders[0] if self.holders else None
                self.comm = self._connect(fallback, lambda kind: transports.star(
                    kind, world, up, down, up_buffer=getattr(worker, "message", None),
                    reply_buffer=getattr(self.server, "reply", None)))
                self.fused = fused_loops.usable(algo, params, self.transport, K)
            return
        first = 0 if size == 1 else rank
        self.holders = [algo.node.build(params, K, d, a, b, topology, first + i)
                        for i, (a, b) in enumerate(local)]
        if topology is None:
            from .graph import NoExchange
            self.comm = NoExchange()
            self.transport = "none"
        elif size == 1:
            from ..comm.graph import LocalGraph
            self.comm = LocalGraph(topology, [getattr(h, "inbox", None) for h in self.holders])
        else:
            node = self.holders[0]
            inbox = getattr(node, "inbox", None)
            # a node with an inbox sends the same message array every round: bind to both
            self.comm = self._connect(fallback, lambda kind: transports.graph(
                kind, world, topology, node.message.shape,
                message=node.message if inbox is not None else None, inbox=inbox))
            self.fused = fused_loops.usable(algo, params, self.transport, K)

    def _connect(self, fallback: bool, build):
        """The exchange of :attr:`transport`, built by ``build(kind)`` (collective); with
        ``fallback`` (--transport auto) shared memory that cannot be set up on this node falls
        back to MPI on every rank, else it is an error."""
        from ..comm.doorbell import SetupError
        if self.transport == "shm":
            from ..comm.shm import set_batch_policy
            try:
                comm = build("shm")
            except SetupError as exc:
                if not fallback:
                    raise SetupFailed(f"--transport shm: {exc}; use --transport mpi") from None
                self.transport = "mpi"
            else:
                # ranks that sleep and wake each other: the one that rings keeps its core
                self._policy = set_batch_policy()
                return comm
        return build(self.transport)

    def run(self, batches, clock, progress, first_round: int = 0, fault=None, checkpoint=None):
        """Rounds ``first_round..T-1``; predictions per holder (int8, -1/+1; T x B x kb) and
        staleness (holders x T).

        While the rounds run, :attr:`preds` holds booleans (True for +1): one numpy call per
        round instead of three; they become labels once, here.
        """
        rounds = clock.rows.shape[0]
        if self.preds is None:
            self.preds = [np.zeros((rounds,) + b.y.shape[1:], dtype=bool) for b in batches]
            self.staleness = np.zeros((len(self.holders), rounds))
        if self.algo.pattern == "server":
            worker = self.holders[0] if self.holders else None
            loop = fused_loops.run_star if self.fused else run_star
            loop(self.comm, worker, self.server, batches[0] if batches else None, clock,
                 progress, self.preds[0] if self.preds else None, first_round, fault, checkpoint)
        else:
            loop = fused_loops.run_graph if self.fused else run_graph
            loop(self.comm, self.holders, batches, clock, progress, self.preds,
                 self.staleness, first_round, fault, checkpoint)
        return [np.where(p, 1, -1).astype(np.int8) for p in self.preds], self.staleness

    def close(self) -> None:
        """Release the exchange's resources (persistent requests, the graph communicator, the
        shared window and bells) and the scheduling policy the shared-memory exchange set."""
        free = getattr(self.comm, "free", None)
        if free is not None:
            free()
        if self._policy is not None:
            from ..comm.shm import restore_policy
            restore_policy(self._policy)
            self._policy = None

    def state(self) -> dict:
        """Every variable of this rank's learner objects (checkpoints, generic checks)."""
        out = {f"holder{i}": h.state() for i, h in enumerate(self.holders)}
        if self.server is not None:
            out["server"] = self.server.state()
        return out

    def load_state(self, state: dict) -> None:
        for i, h in enumerate(self.holders):
            h.load_state(state[f"holder{i}"])
        if self.server is not None:
            self.server.load_state(state["server"])


def _cpu_seconds() -> float:
    """User and system CPU seconds this process has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _gather(world, holders, preds, batches, extras, T, B, d) -> dict:
    """Per-task arrays of every holder on every rank, concatenated in task order on rank 0."""
    parts = {"mistakes": [], "predictions": [], "confusion": []}
    rows: dict = {}
    for holder, p, batch in zip(holders, preds, batches):
        y = batch.y
        kb = y.shape[2]
        parts["mistakes"].append(((p != y) & (y != 0)).sum(axis=1, dtype=np.int32).T)
        yhat_rows = p.transpose(2, 0, 1).reshape(kb, -1)
        parts["predictions"].append(yhat_rows)
        parts["confusion"].append(metrics.confusion(yhat_rows, y.transpose(2, 0, 1).reshape(kb, -1)))
        for key, value in holder.task_rows().items():
            rows.setdefault(key, []).append(np.asarray(value))
    empty = {"mistakes": np.zeros((0, T), np.int32), "predictions": np.zeros((0, T * B), np.int8),
             "confusion": np.zeros((0, 4), np.int64)}
    local = {k: (np.concatenate(v) if v else empty[k]) for k, v in parts.items()}
    # the row arrays every algorithm of this run has (the server rank holds none)
    names = sorted(world.agree(sorted(rows)), key=len)[-1]
    for key in names:
        local[key] = np.concatenate(rows[key]) if key in rows else np.zeros((0, d))
    counts = world.agree(local["mistakes"].shape[0])
    out = {key: world.gather_rows(np.ascontiguousarray(value), counts) for key, value in local.items()}
    node_counts = world.agree(len(holders))
    for key, value in extras.items():
        out[key] = world.gather_rows(np.ascontiguousarray(value), node_counts)
    return out


def _role(rank: int, size: int, pattern: str, local) -> str:
    parts = []
    if pattern == "server" and rank == 0:
        parts.append("server")
    for a, b in local:
        kind = "worker" if pattern == "server" else "node"
        parts.append(f"{kind} tasks {a}-{b - 1}" if b - a > 1 else f"{kind} task {a}")
    if len(parts) > 3:
        parts = [parts[0], "...", parts[-1]]
    return " + ".join(parts)
