"""Read a sweep folder: its index and the results file of every finished run."""
import dataclasses
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass

import h5py
import numpy as np

from ..data.taskfile import H5_ERRORS, reason
from ..config import MODEL_OPTIONS
from ..errors import UserError
from ..paths import regular_file


@dataclass
class Outcome:
    """What a report needs of one finished run."""

    id: str
    data: str
    variant: str            # the row it belongs to: algorithm key, topology, grid point
    label: str              # the row's name in tables and legends
    algorithm: str          # the sweep file's key of its learner entry
    algo: str
    seed: int | None
    ranks: int
    topology: str | None
    relationship: bool
    default_params: bool    # the paper's hyper-parameters and model options (relationship aside)
    mean_error: float
    overall_error: float
    balanced_error: float
    f1: float
    ms_per_round: float
    curve: np.ndarray
    task_names: list
    path: str


@dataclass
class Sweep:
    folder: str
    name: str
    data: dict              # key -> {"label", "tasks", "target", "describe"}, in file order
    algorithms: dict        # key -> {"label", "algo"}, in file order
    outcomes: list
    not_done: list          # (id, status, error) of recorded runs that did not finish
    missing: list           # ids of the plan that were never recorded


def _variant_label(rec: dict, algorithms: dict) -> str:
    parts = [algorithms.get(rec["algorithm"], {}).get("label", rec["algorithm"])]
    if rec.get("shown_topology"):          # the topology is a grid axis of its entry
        parts.append(rec["shown_topology"])
    parts += [f"{k}={v}" for k, v in (rec.get("grid") or {}).items()]
    return " ".join(parts)


def _has_default_params(algo: str, cfg: dict) -> bool:
    """Every hyper-parameter (relationship learning aside) and every model option of the run's
    configuration as the paper sets them (``--preset paper``): the runs that Table 4, the
    paper's ablation, compares. A hyper-parameter that a results file of an older version does
    not record had the paper's value there (a new option starts at the paper's model)."""
    from ..options import run_config
    paper = run_config({"algo": algo, "preset": "paper"})
    params = dataclasses.asdict(paper.params)
    return (all(cfg["params"].get(k, v) == v for k, v in params.items() if k != "relationship")
            and all(cfg.get(k, getattr(paper, k)) == getattr(paper, k) for k in MODEL_OPTIONS))


def load_sweep(folder: str) -> Sweep:
    """The finished runs of the sweep in ``folder``, in the sweep file's order.

    Raises
    ------
    UserError
        One line, if ``folder`` is not a sweep folder, its index is damaged, or a results file
        it names cannot be read.
    """
    from ..sweep.index import INDEX, read_index
    index_path = os.path.join(folder, INDEX)
    if not os.path.lexists(index_path):
        raise UserError(f"{folder} is not a sweep folder (no {INDEX}); run 'omtl-mpi sweep FILE.toml --out {folder}' first")
    index = read_index(folder)
    algorithms, plan = _checked_index(index, index_path)
    outcomes, not_done, missing = [], [], []
    for rid in plan:
        rec = index["runs"].get(rid)
        if rec is None:
            missing.append(rid)
            continue
        _check_record(rec, rid, index_path)
        if rec["status"] != "done":
            not_done.append((rid, rec["status"], rec.get("error")))
            continue
        outcomes.append(_outcome(folder, rid, rec, algorithms))
    return Sweep(folder=folder, name=str(index.get("name", os.path.basename(folder))),
                 data=index.get("data", {}), algorithms=algorithms, outcomes=outcomes,
                 not_done=not_done, missing=missing)


def _damaged_index(index_path: str, what: str) -> UserError:
    return UserError(f"{index_path}: {what}; the sweep index is damaged: move it away and run "
                     "the sweep again")


def _checked_index(index: dict, index_path: str) -> tuple[dict, list]:
    """The index's learner entries and run order, once their types are what the runner writes."""
    algorithms = index.get("algorithms", {})
    if not isinstance(algorithms, dict) or not all(isinstance(v, dict) for v in algorithms.values()):
        raise _damaged_index(index_path, "'algorithms' is not a table of learner entries")
    data = index.get("data", {})
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise _damaged_index(index_path, "'data' is not a table of data sets")
    plan = index.get("plan") or list(index["runs"])
    if not isinstance(plan, list) or not all(isinstance(rid, str) for rid in plan):
        raise _damaged_index(index_path, "'plan' is not a list of run ids")
    return algorithms, plan


# the fields of a run's record that a report reads, and their types
_RECORD = {"status": (str,), "data": (str,), "variant": (str,), "algorithm": (str,), "algo": (str,),
           "seed": (int, type(None)), "results": (str,)}


def _check_record(rec, rid: str, index_path: str) -> None:
    if rec["status"] != "done":             # read_index has checked that there is one
        return
    for key, types in _RECORD.items():
        if not isinstance(rec.get(key), types) or isinstance(rec.get(key), bool):
            raise _damaged_index(index_path, f"the record of run {rid} has no valid '{key}'")
    if not isinstance(rec.get("grid") or {}, dict):
        raise _damaged_index(index_path, f"the record of run {rid} has no valid 'grid'")


@contextmanager
def results_file(path: str, rid: str):
    """Run ``rid``'s results file, open for reading; a file that is not a regular file, or that
    cannot give what is read from it, is one line saying how to redo the run."""
    try:
        regular_file(path, "results file")
        with h5py.File(path, "r") as f:
            yield f
        return
    except UserError as exc:
        why = str(exc).removeprefix(f"{path}: ")
    except H5_ERRORS as exc:
        why = reason(exc)
    raise UserError(f"{path}: cannot read the results of run {rid} ({why}); "
                    f"delete it and re-run the sweep to redo that run")


def _overall_error(f) -> float:
    """The run's error over all instances: its attribute, or (a results file of a version
    that did not write it) its mistakes' mean."""
    if "overall_error" in f.attrs:
        return float(f.attrs["overall_error"])
    mistakes = f["metrics/mistakes"][()]
    return float(np.mean(mistakes)) if mistakes.size else 0.0


def _outcome(folder: str, rid: str, rec: dict, algorithms: dict) -> Outcome:
    """What a report needs of run ``rid``, read from its results file."""
    path = os.path.join(folder, rec["results"])
    with results_file(path, rid) as f:
        cfg = json.loads(f.attrs["config"])
        return Outcome(
            id=rid, data=rec["data"], variant=rec["variant"],
            label=_variant_label(rec, algorithms), algorithm=rec["algorithm"],
            algo=rec["algo"], seed=rec["seed"],
            ranks=int(f.attrs["ranks"]), topology=rec.get("topology"),
            relationship=bool(cfg["params"].get("relationship", False)),
            default_params=_has_default_params(rec["algo"], cfg),
            mean_error=float(f.attrs["mean_error"]),
            overall_error=_overall_error(f),
            balanced_error=float(f.attrs["balanced_error"]), f1=float(f.attrs["f1"]),
            ms_per_round=float(f.attrs["ms_per_round"]),
            curve=np.asarray(f["metrics/mean_curve"][()], dtype=np.float64),
            task_names=[n.decode(errors="replace") if isinstance(n, bytes) else str(n)
                        for n in f["tasks/names"][()]],
            path=path)
