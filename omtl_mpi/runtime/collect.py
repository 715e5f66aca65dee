"""The end of a run: every rank's predictions, model and measurements gathered on rank 0 in
task order, the report (what ``--json`` prints) and the results file."""
from __future__ import annotations

import os
import resource

import numpy as np

from .. import metrics
from ..data.footprint import chunk_rows as _chunk_rows
from ..engine.stragglers import last_at_barrier
from .results import Learned, Measured, write_results


def _chunks(lengths, a: int, b: int, rows: int):
    """Consecutive ranges of tasks a..b-1 of at most ``rows`` instances each (a whole task
    where one is longer)."""
    ends = np.cumsum(lengths[a:b])
    start = a
    while start < b:
        base = ends[start - a - 1] if start > a else 0
        stop = a + int(np.searchsorted(ends, base + rows, side="right"))
        stop = min(max(stop, start + 1), b)
        yield start, stop
        start = stop


# the environment variables that choose how MPI moves messages, recorded with the hosts
TRANSPORT_ENV = ("UCX_TLS", "UCX_NET_DEVICES", "FI_PROVIDER", "MPIR_CVAR_CH4_NETMOD",
                 "MPIR_CVAR_NOLOCAL", "OMPI_MCA_pml", "OMPI_MCA_btl", "OMPI_MCA_btl_tcp_if_include")


def _hosts_report(job: Job) -> dict:
    """Where the ranks ran: each rank's host, ranks per host, the MPI library and the
    transport settings, and the hosts whose ranks shared memory (network namespaces of one
    machine do, unless MPI is told to keep to its network)."""
    hosts, groups, library = job.hosts
    shared = {}
    for host, group in zip(hosts, groups):
        shared.setdefault(group, set()).add(host)
    return {"hosts": list(hosts), "ranks_per_host": {h: hosts.count(h) for h in dict.fromkeys(hosts)},
            "mpi_library": library,
            "transport_env": " ".join(f"{k}={os.environ[k]}" for k in TRANSPORT_ENV if k in os.environ)
            or "none",
            "shared_memory_across_hosts": sorted(sorted(g) for g in shared.values() if len(g) > 1)}


def collect(job: Job, out: str | None) -> dict | None:
    """Gather the predictions, model and timings of ``job`` (after :func:`learn`) on rank 0 in
    task order, and write them to the results file ``out`` (HDF5, atomically) if one is named.
    Collective. Returns the report on rank 0 (what ``--json`` prints), None elsewhere."""
    world, algo = job.world, job.algo
    rank, size = world.rank, world.size
    if rank != 0 or not out:
        job.fault.check("write")             # rank 0 with a results file fails inside the write
    gathered = _gather(world, job.roles, job.preds, job.batches, _node_extras(job), job.dim)

    def each(value):            # every rank's value (or array), in rank order on rank 0
        return world.gather_rows(np.asarray(value)[None], [1] * size)
    timing = each(job.clock.rows)
    workers = list(range(1, size) if algo.pattern == "server" and size > 1 else range(size))
    schedule = _schedule(job)
    predicted_at, unit = _predicted_at(job)
    measured = Measured(seconds=timing, roles=world.agree(_role(rank, algo.pattern,
                                                                 job.roles.local)),
                        # every rank's peak resident memory in MiB (Linux reports KiB)
                        peak_rss=each(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0),
                        cpu_seconds=each(job.cpu_seconds), staleness=gathered.get("staleness"),
                        # each rank's last round's end, and the sleeps --slow and --delays asked
                        finished=each(job.finished),
                        injected=each(job.delay.injected if job.delay else 0.0),
                        # asynchronous rounds have no barrier to be last at
                        last=(last_at_barrier(timing, workers if schedule is None else [])
                              if rank == 0 else None),
                        workers=workers, stragglers=job.stragglers.describe(), schedule=schedule,
                        predicted_at=predicted_at, predicted_unit=unit,
                        blocks=np.asarray(job.roles.all_blocks, dtype=np.int64),
                        hosts=job.hosts[0], shm_groups=job.hosts[1],
                        traffic=each(job.clock.traffic), peer_bytes=each(job.clock.peers))
    if rank != 0:
        return None
    lengths = job.meta.lengths
    confusion = metrics.confusion(gathered["predictions"], gathered["labels"], lengths)
    summary = metrics.summarise(gathered["mistakes"], lengths, job.cfg.batch, job.rounds, confusion)
    summary["confusion"] = confusion
    report = _report(job, summary, gathered, measured)
    learned = _learned(job, summary, gathered)
    attrs = {k: v for k, v in report.items() if isinstance(v, (int, float, str, bool))}
    if out:
        write_results(out, attrs=attrs, config=job.cfg.to_dict(), learned=learned,
                      measured=measured, before_rename=lambda: job.fault.check("write"))
        report["results"] = out
    # what the Python API keeps of a run (omtl_mpi.streams.Result): enough to write its file
    report["_written"] = (attrs, job.cfg.to_dict(), learned, measured)
    report.update(_timing=measured.seconds, _roles=measured.roles, _last=measured.last,
                  peak_rss_mib=measured.peak_rss.tolist())
    return report


def _predicted_at(job: Job) -> tuple:
    """When every task holder's rounds started, that is when their instances were predicted
    (holders x rounds, on rank 0), and in what unit: seconds from the start of the rounds, or
    on --sync partial's simulated clock its time units. Rounds before a resumed checkpoint
    are NaN. Collective."""
    roles, world = job.roles, job.world
    simulated = roles.predicted_at
    if simulated is not None:
        return simulated, "simulated time units (a worker's round lasts its straggler factor)"
    mine = job.clock.started - job.started_at
    mine[:job.first_round] = np.nan
    rows = np.repeat(mine[None], len(roles.holders), axis=0)
    return (world.gather_rows(rows, world.agree(len(roles.holders))),
            "seconds from the start of the rounds")


def _schedule(job: Job) -> dict | None:
    """--sync partial: the run's schedule on rank 0 (every worker's rounds' taken and used
    steps, W x T each), with the barrier's settings; None otherwise. Collective."""
    partial = job.roles.partial
    if partial is None:
        return None
    taken, used = job.roles.schedule
    world = job.world
    graph = job.algo.pattern != "server"
    if world.size > 1 and graph:            # every rank's node: (1, T, width) each
        used = world.gather_rows(used, [1] * world.size)
    elif world.size > 1:
        mine = (np.zeros((0, job.rounds), dtype=np.int64) if used is None
                else np.asarray(used, dtype=np.int64)[None])
        used = world.gather_rows(mine, [0] + [1] * (world.size - 1))
    if world.rank != 0:
        return None
    return {"taken": taken, "used": used, "max_delay": partial.max_delay,
            "min_workers": None if graph else partial.min_workers,
            "replayed": partial.schedule is not None}


def _node_extras(job: Job) -> dict:
    """The per-node arrays a neighbour learner's holders have besides their tasks' rows: the
    staleness of what they used, and every node's own copy of the shared variables."""
    if job.algo.pattern == "server":
        return {}
    extras = {} if job.topology is None else {"staleness": job.roles.staleness}
    node_arrays = [h.node_arrays() for h in job.roles.holders]
    nodes = job.topology.n_nodes if job.topology is not None else len(node_arrays)
    for key in (node_arrays[0] if node_arrays else {}):
        # every node's own copy, unless they would not fit in a results file (a K x K Omega
        # per node at large K): then node 0's only, as the model's (the same on every rank)
        if nodes * np.asarray(node_arrays[0][key]).size <= _NODE_ARRAY_LIMIT:
            extras[f"node_{key}"] = np.stack([np.asarray(na[key]) for na in node_arrays])
    return extras


# the most numbers of one shared array over all nodes that a results file keeps (256 MiB)
_NODE_ARRAY_LIMIT = 1 << 25


def _report(job: Job, summary: dict, gathered: dict, measured: Measured) -> dict:
    """The report rank 0 returns (what ``--json`` prints); its scalars are the results file's
    root attributes."""
    meta, params, cfg = job.meta, job.params, job.cfg
    ran = max(job.rounds - job.first_round, 1)
    report = {
        "algo": job.algo.name, "variant": getattr(params, "variant", "-"),
        "loss": getattr(params, "loss", "hinge"), "relationship": getattr(params, "relationship", False),
        "data": job.source.describe(), "tasks": meta.n_tasks, "dim": job.dim, "ranks": job.world.size,
        "rounds": job.rounds, "batch": cfg.batch, "seed": cfg.seed, "intercept": cfg.intercept,
        "scale": cfg.scale,
        "mean_error": summary["mean_error"], "overall_error": summary["overall_error"],
        "error_by_length": summary["by_length"],
        "per_task_error": summary["per_task_error"].tolist(),
        "balanced_error": summary["balanced_error"], "f1": summary["f1"],
        # the rounds this invocation ran (all of them, or those after the checkpoint)
        "seconds": job.seconds, "ms_per_round": 1000.0 * job.seconds / ran,
        # rank 0's first round (UNIX time): after the command's start by the data's set-up
        "learning_started": job.learning_started,
        "task_names": list(meta.names), "eta": getattr(params, "eta", None),
        "transport": job.roles.transport,
        "cpu_ms_per_round": (1000.0 * measured.cpu_seconds / ran).tolist(),
        # address-space layout randomisation of the ranks (--aslr): on, off, mixed or unknown
        "aslr": ("unknown" if None in job.layouts else "mixed" if len(job.layouts) > 1
                 else "on" if job.layouts == {True} else "off"),
        # seconds from the start of the rounds at which each worker rank ended its last one
        "worker_finish_s": measured.finished[measured.workers].tolist(),
        "stragglers": measured.stragglers,
        "injected_s": measured.injected.tolist(),
        # per rank, the rounds in which the other workers waited for it (straggler histogram)
        "last_at_barrier": measured.last.tolist(),
        **_hosts_report(job),
        # per rank, the mean bytes a round it sent and received (MPI's; none in one process)
        "bytes_per_round": (measured.traffic.mean(axis=1).tolist() if measured.traffic.shape[1]
                            else [[0.0, 0.0]] * job.world.size),
    }
    if job.topology is not None:
        report.update(topology=job.topology.name, nodes=job.topology.n_nodes,
                      mean_staleness=float(gathered["staleness"].mean()) if job.rounds else 0.0)
    return report


def _learned(job: Job, summary: dict, gathered: dict) -> Learned:
    """The results file's /tasks, /metrics, /model and /predictions (:mod:`.results`)."""
    model = {k: gathered[k] for k in ("W", "Z", "V", "U") if k in gathered}
    if job.algo.pattern == "server":
        model.update(job.roles.server.global_arrays())
    elif job.roles.holders and job.world.rank == 0 and job.topology is not None:
        # node 0's own copies (every node has its own u and Omega): rank 0 holds node 0
        model.update(job.roles.holders[0].node_arrays())
    model.update({key: value for key, value in gathered.items() if key.startswith("node_")})
    return Learned(names=job.meta.names, lengths=job.meta.lengths,
                   metrics={**summary, "mistakes": gathered["mistakes"]},
                   model=model, predictions=gathered["predictions"])


def _gather(world, engine, preds, batches, extras, d) -> dict:
    """Every instance's prediction, label and mistake (task-major, flat), the holders'
    per-task arrays and the per-node extras, concatenated in task order on rank 0."""
    parts = {"predictions": [], "labels": [], "mistakes": []}
    for p, layout in zip(preds, batches):
        layout.X = layout.csr = None        # the rounds are over: free the features first
        # task-major, a chunk of tasks at a time (the slots' index costs 8 bytes an instance)
        for c0, c1 in _chunks(layout.lengths, 0, layout.n_tasks, _chunk_rows(8)):
            order = layout.slots_of(c0, layout.lengths[c0:c1])
            yhat = np.asarray(p[order], dtype=np.int8)      # -1/+1 (Engine.run's labels)
            y = layout.labels(order)
            parts["predictions"].append(yhat)
            parts["labels"].append(y)
            parts["mistakes"].append((yhat != y).astype(np.int8))
    local = {k: (np.concatenate(v) if v else np.zeros(0, np.int8)) for k, v in parts.items()}
    rows = engine.task_rows()      # this rank's holders' per-task arrays, in task order
    # the row arrays every algorithm of this run has (the server rank holds none)
    names = sorted(world.agree(sorted(rows)), key=len)[-1]
    counts = world.agree(sum(int(h.n_tasks) for h in batches))
    instances = world.agree(int(local["predictions"].shape[0]))
    node_counts = world.agree(len(engine.holders))
    out = {}
    for arrays, n in (({key: rows.get(key, np.zeros((0, d))) for key in names}, counts),
                      (local, instances), (extras, node_counts)):
        for key, value in arrays.items():
            out[key] = world.gather_rows(np.ascontiguousarray(value), n)
    return out


def _role(rank: int, pattern: str, local) -> str:
    kind = "worker" if pattern == "server" else "node"
    parts = ["server"] if pattern == "server" and rank == 0 else []
    parts += [f"{kind} tasks {a}-{b - 1}" if b - a > 1 else f"{kind} task {a}" for a, b in local]
    if len(parts) > 3:
        parts = [parts[0], "...", parts[-1]]
    return " + ".join(parts)
