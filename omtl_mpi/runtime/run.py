"""Run one learner on one data set: setup and validation on every rank, rounds, results on rank 0."""
from __future__ import annotations

from time import perf_counter

import numpy as np

from .. import metrics
from ..algorithms import registry
from ..comm.clock import PhaseClock
from ..comm.local import LocalStar
from ..config import RunConfig
from ..data.rounds import RoundBatches, rounds_needed
from .layout import check_star_world, task_blocks
from .progress import Progress
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
    results folder. Raises UserError."""
    algo = registry.get(cfg.algo)
    meta = source.meta()
    check_star_world(size, meta.n_tasks, algo.name)
    if out:
        check_writable(out)
    return algo, meta


def preflight(cfg: RunConfig, n_ranks: int, out: str | None) -> None:
    """The checks of a run on ``n_ranks`` ranks, made before mpiexec is started (``--np``)."""
    _check(cfg, make_source(cfg), n_ranks, out)


def run(cfg: RunConfig, *, out: str | None = None, world=None, progress: bool = False,
        notice=None) -> dict | None:
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

    Raises
    ------
    SetupFailed
        On every rank, when any rank found a user error before learning started.
    """
    world = world if world is not None else default_world()
    rank, size = world.rank, world.size
    source = make_source(cfg)
    algo, meta = collective(world, lambda: _check(cfg, source, size, out if rank == 0 else None))
    # Every rank must run the same configuration on the same data: compare before learning.
    signature = (cfg.fingerprint(), meta.names, tuple(int(n) for n in meta.lengths), meta.dim)
    if len(set(world.agree(signature))) > 1:
        raise SetupFailed("ranks disagree on the configuration or the data set (different files, "
                          "options or versions on different nodes?); start every rank with the "
                          "same command and data")

    K, d, B = meta.n_tasks, meta.dim, cfg.batch
    T = rounds_needed(meta.lengths, B)
    params = cfg.params.resolved(T)
    if size == 1:
        blocks = [(0, K)]
        my_block = blocks[0]
    else:
        blocks = task_blocks(K, size - 1)
        my_block = blocks[rank - 1] if rank > 0 else None
    is_server, is_worker = rank == 0, my_block is not None

    streams = collective(world, lambda: source.load(np.arange(*my_block)) if is_worker else None)
    notices = world.agree(list(streams.notices) if streams is not None else [])
    if rank == 0 and notice is not None:
        for line in dict.fromkeys(n for ns in notices for n in ns):
            notice(line)

    worker = server = stream = None
    if is_worker:
        stream = RoundBatches(streams.X, streams.y, B, T, d)
        worker = algo.worker(params, my_block[0], my_block[1], d)
        del streams
    if is_server:
        server = algo.server(params, K, d, blocks)
    if size == 1:
        comm = LocalStar()
    else:
        from ..comm.mpi import MpiStar
        up = [0] + [algo.worker.up_size(b - a, d) for a, b in blocks]
        down = [0] + [algo.worker.down_size(b - a, d) for a, b in blocks]
        comm = MpiStar(world.comm, up, down)

    clock = PhaseClock(T)
    bar = Progress(T, enabled=progress and rank == 0)
    world.barrier()
    t0 = perf_counter()
    preds = run_star(comm, worker, server, stream, clock, bar)
    seconds = perf_counter() - t0

    # -- collect on rank 0 (server rank contributes zero rows) ------------------------------
    kb = my_block[1] - my_block[0] if is_worker else 0
    if is_worker:
        y = stream.y
        mistakes = ((preds != y) & (y != 0)).sum(axis=1, dtype=np.int32).T   # (kb, T)
        yhat_rows = preds.transpose(2, 0, 1).reshape(kb, -1)
        y_rows = y.transpose(2, 0, 1).reshape(kb, -1)
        conf = metrics.confusion(yhat_rows, y_rows)
        rows = worker.task_rows()
    else:
        mistakes = np.zeros((0, T), dtype=np.int32)
        yhat_rows = np.zeros((0, T * B), dtype=np.int8)
        conf = np.zeros((0, 4), dtype=np.int64)
        rows = {name: np.zeros((0, d)) for name in ("W", "Z")}
    counts = [b - a for a, b in blocks] if size == 1 else [0] + [b - a for a, b in blocks]
    g_mistakes = world.gather_rows(mistakes, counts)
    g_preds = world.gather_rows(yhat_rows, counts)
    g_conf = world.gather_rows(conf, counts)
    g_rows = {name: world.gather_rows(np.ascontiguousarray(arr), counts)
              for name, arr in sorted(rows.items())}
    timing = world.gather_rows(clock.rows[None], [1] * size)
    roles = world.agree(_role(rank, size, my_block))
    if rank != 0:
        return None

    summary = metrics.summarise(g_mistakes, meta.lengths, B, g_conf)
    report = {
        "algo": algo.name, "variant": params.variant, "loss": params.loss,
        "relationship": params.relationship,
        "data": source.describe(), "tasks": K, "dim": d, "ranks": size, "rounds": T, "batch": B,
        "mean_error": summary["mean_error"],
        "per_task_error": summary["per_task_error"].tolist(),
        "balanced_error": summary["balanced_error"], "f1": summary["f1"],
        "seconds": seconds, "ms_per_round": 1000.0 * seconds / max(T, 1),
        "task_names": list(meta.names), "eta": params.eta,
    }
    if out:
        model = dict(g_rows)
        model.update(server.global_arrays())
        summary["mistakes"] = g_mistakes
        summary["confusion"] = g_conf
        write_results(out, attrs={k: v for k, v in report.items()
                                  if isinstance(v, (int, float, str, bool))},
                      config=cfg.to_dict(), names=meta.names, lengths=meta.lengths,
                      metrics=summary, model=model, predictions=g_preds, timing=timing,
                      roles=roles)
        report["results"] = out
    report["_timing"] = timing
    report["_roles"] = roles
    return report


def _role(rank: int, size: int, block) -> str:
    parts = []
    if rank == 0:
        parts.append("server")
    if block is not None:
        a, b = block
        parts.append(f"worker tasks {a}-{b - 1}" if b - a > 1 else f"worker task {a}")
    return " + ".join(parts)
