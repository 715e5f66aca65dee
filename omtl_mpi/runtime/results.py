"""The results file: one HDF5 file written by rank 0, atomically (temporary name, then rename).

Its layout, path by path, is docs/GUIDE.md's *Reading results*: the report's scalars and the
JSON configuration as the root's attributes, then /config, /tasks, /predictions, /metrics,
/model, /timing (per rank, and per node of neighbour learners) and /schedule (--sync partial),
in plain numpy types throughout, readable with h5py.
"""
from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from datetime import datetime, timezone

import h5py
import numpy as np

from .. import __version__
from ..atomic import atomic_path
from ..comm.clock import PHASES

FORMAT = "omtl-mpi-results"
# bumped whenever the layout changes (2: per-instance arrays task-major, /tasks/offsets)
VERSION = 2


def flatten(d: dict, prefix: str = "") -> dict:
    """``{"params": {"eta": 1}}`` -> ``{"params.eta": 1}``."""
    out = {}
    for key, value in d.items():
        out.update(flatten(value, f"{prefix}{key}.") if isinstance(value, dict)
                   else {f"{prefix}{key}": value})
    return out


@dataclass(frozen=True)
class Learned:
    """What a run learned and predicted, in task order: the results file's /tasks, /metrics,
    /model and /predictions groups."""

    names: tuple                # (K,) task names
    lengths: np.ndarray         # (K,) stream lengths
    metrics: dict               # the datasets of /metrics, by name (see the module's layout)
    model: dict                 # final variables, by name
    predictions: np.ndarray     # (N,) every instance's prediction, task-major


@dataclass(frozen=True)
class Measured:
    """What a run measured of itself, per rank (and per node): the /timing group."""

    seconds: np.ndarray         # (P, T, 3) per rank, round and phase
    roles: list                 # (P,) what each rank did
    peak_rss: np.ndarray | None = None      # (P,) MiB
    cpu_seconds: np.ndarray | None = None   # (P,) during the rounds
    staleness: np.ndarray | None = None     # (N, T) neighbour learners only
    finished: np.ndarray | None = None      # (P,) seconds from the start to the last round's end
    injected: np.ndarray | None = None      # (P,) seconds of sleep --slow and --delays asked for
    last: np.ndarray | None = None          # (P,) rounds in which the others waited for the rank
    workers: list = field(default_factory=list)     # the ranks that wait for each other
    stragglers: str = "none"                # what --slow and --delays injected
    schedule: dict | None = None            # --sync partial: taken, used (W, T) and settings
    predicted_at: np.ndarray | None = None  # (H, T) when each task holder's rounds started
    predicted_unit: str = "seconds from the start of the rounds"
    blocks: np.ndarray | None = None        # (H, 2) each holder's tasks, start and stop
    hosts: list | None = None               # (P,) each rank's host name
    shm_groups: list | None = None          # (P,) the lowest rank each rank shares memory with
    traffic: np.ndarray | None = None       # (P, T, 2) bytes each rank sent, received a round
    peer_bytes: np.ndarray | None = None    # (P, P, 2) bytes rank p sent to, received from q


def write_results(path: str, *, attrs: dict, config: dict, learned: Learned, measured: Measured,
                  before_rename=None) -> None:
    """Write the results file ``path`` (HDF5) atomically; on failure nothing is left there.

    ``attrs``, the report's scalars, become the root's attributes (None as "none"); ``config``
    (``RunConfig.to_dict()``) is JSON in the root's ``config`` attribute and flattened into
    /config's; ``learned`` and ``measured`` are the datasets. ``before_rename`` is called with
    everything written under the temporary name, just before the rename (fault injection uses
    it to prove that a failure there leaves nothing behind).
    """
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        _write_root(f, attrs, config)
        _write_learned(f, learned)
        _write_measured(f.create_group("timing"), measured)
        f.flush()
        if before_rename is not None:
            before_rename()


def _write_root(f, attrs: dict, config: dict) -> None:
    """The root's attributes (format, version, provenance, the report's scalars) and /config."""
    f.attrs.update(format=FORMAT, format_version=VERSION, omtl_mpi_version=__version__,
                   created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                   host=socket.gethostname(), config=json.dumps(config, sort_keys=True))
    f.attrs.update({key: "none" if value is None else value for key, value in attrs.items()})
    f.create_group("config").attrs.update({key: "none" if value is None else value
                                           for key, value in flatten(config).items()})


def _write_learned(f, learned: Learned) -> None:
    """/tasks, /metrics, /model and /predictions."""
    t = f.create_group("tasks")
    t.create_dataset("names", data=np.array(list(learned.names), dtype=h5py.string_dtype()))
    lengths = np.asarray(learned.lengths, dtype=np.int64)
    t.create_dataset("samples", data=lengths)
    t.create_dataset("offsets", data=np.concatenate(([0], np.cumsum(lengths))))
    m = f.create_group("metrics")
    for key in ("mistakes", "mean_curve", "per_task_error", "per_task_balanced_error",
                "per_task_f1", "confusion"):
        m.create_dataset(key, data=learned.metrics[key])
    m["confusion"].attrs["columns"] = ["tp", "fp", "fn", "tn"]
    m.attrs["error_by_length"] = json.dumps(learned.metrics["by_length"])
    mo = f.create_group("model")
    for key, value in learned.model.items():
        mo.create_dataset(key, data=value)
    f.create_dataset("predictions", data=np.asarray(learned.predictions, dtype=np.int8))


def _write_measured(tg, measured: Measured) -> None:
    """/timing: seconds per rank, round and phase; roles; memory, CPU time and staleness."""
    tg.create_dataset("seconds", data=measured.seconds).attrs.update(
        phases=list(PHASES), dims=["rank", "round", "phase"])
    tg.create_dataset("roles", data=np.array(list(measured.roles), dtype=h5py.string_dtype()))
    if measured.peak_rss is not None:
        tg.create_dataset("peak_rss_mib", data=measured.peak_rss).attrs["unit"] = "MiB, per rank"
    if measured.cpu_seconds is not None:
        tg.create_dataset("cpu_seconds", data=measured.cpu_seconds).attrs["unit"] = (
            "CPU seconds (user + system) per rank during the rounds")
    if measured.staleness is not None:
        tg.create_dataset("staleness", data=measured.staleness).attrs.update(
            dims=["node", "round"],
            unit="rounds: mean over tasks of (round - stamp of the row used)")
    if measured.finished is not None:
        tg.create_dataset("finish_seconds", data=measured.finished).attrs["unit"] = (
            "seconds from the start of the rounds to the end of the rank's last round")
        tg.create_dataset("injected_seconds", data=measured.injected).attrs["unit"] = (
            "seconds of sleep --slow and --delays added to the rank's rounds")
        tg.create_dataset("last_at_barrier", data=measured.last).attrs.update(
            unit="rounds in which the rank was the last of the workers to arrive (waited least), "
                 "the others waiting for it", workers=np.asarray(measured.workers, dtype=np.int64))
        tg.attrs["stragglers"] = measured.stragglers
    if measured.hosts is not None:
        tg.create_dataset("hosts", data=np.array(list(measured.hosts), dtype=h5py.string_dtype()))
        tg.create_dataset("shm_group", data=np.asarray(measured.shm_groups, dtype=np.int64)).attrs[
            "meaning"] = "the lowest rank of the ranks this one can share memory with (MPI)"
    if measured.traffic is not None:
        for key, data, dims in (("bytes", measured.traffic, ["rank", "round", "sent/received"]),
                                ("peer_bytes", measured.peer_bytes,
                                 ["rank", "peer", "sent to/received from"])):
            tg.create_dataset(key, data=data).attrs.update(
                dims=dims, unit="bytes of MPI messages (none in one process)")
    if measured.predicted_at is not None:
        tg.create_dataset("predicted_at", data=measured.predicted_at).attrs.update(
            dims=["holder", "round"], unit=measured.predicted_unit, blocks=measured.blocks)
    if measured.schedule is not None:
        sg = tg.file.create_group("schedule")
        sc = measured.schedule
        if sc["taken"] is None:         # a graph's: per node, round and neighbour
            arrays = [("used", ["node", "round", "neighbour"], "the round of the table of each "
                       "neighbour (ascending, -1 past the node's last) that node i merged in round t")]
        else:
            arrays = [("taken", ["worker", "round"], "the server step that took worker w's "
                       "message of round r"),
                      ("used", ["worker", "round"], "the step whose reply worker w's z-step used "
                       "in round r (-1: none yet)")]
        for key, dims, meaning in arrays:
            sg.create_dataset(key, data=np.asarray(sc[key], dtype=np.int64)).attrs.update(
                dims=dims, meaning=meaning)
        for key in ("min_workers", "max_delay", "replayed"):
            if sc[key] is not None:
                sg.attrs[key] = sc[key]
