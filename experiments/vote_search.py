"""Step 10 (b): a vote that knows how much a task has seen, on the selection sets.

Run the search at revision 42a39bf, where the candidates' code is in the package (`git worktree
add ../omtl-42a39bf 42a39bf`; no candidate was chosen, and the code went out after); each
candidate sets the module constants of omtl_mpi.algorithms.experts in the run's own process
(one process, `omtl-mpi run`): ``LENGTHS`` (the stream lengths at which a task passes to the
next class's weights; none: one class, today's vote) and ``CLASS_PRIOR`` (how a class's weights
start: "fixed", the prior of PRIOR_FIRST; "previous", where its shorter neighbour's weights
are; a number, that share of the neighbour's evidence). Prints a Markdown table of the mean error of each selection set of step 10 (the
nine sets of step 1 and the text-like draws over stream orders 0, 1, 2; the paper's family at
K = 1,024 draw 100 over the same orders; the personal draws in their files' order, with the
distance to their membership floor).

Usage: python experiments/vote_search.py [--data-dir DIR] [--landmine FILE] [--only NAME ...]
       python experiments/vote_search.py --by-length --data FILE [--seed S]
Missing data files are drawn into --data-dir (their commands printed). The second form runs
today's vote once (at any revision) and prints each expert's error on the instances a task meets when its stream
has 0-9, 10-29, 30-99, 100-299 and 300 or more instances behind it.
"""
import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "experiments"))
import groups_search  # noqa: E402
from lib import personal  # noqa: E402

OMTL = [sys.executable, "-m", "omtl_mpi"]
# name: (LENGTHS, CLASS_PRIOR)
CANDIDATES = {
    "today (one class)": (None, "fixed"),
    "classes at 4^j, each from the prior": ((4, 16, 64, 256, 1024, 4096), "fixed"),
    "classes at 4^j, each from the shorter class": ((4, 16, 64, 256, 1024, 4096), "previous"),
    "classes at 16, 128, 1024, each from the prior": ((16, 128, 1024), "fixed"),
    "classes at 16, 128, 1024, each from the shorter class": ((16, 128, 1024), "previous"),
    "classes at 4^j, half the shorter class's evidence": ((4, 16, 64, 256, 1024, 4096), "0.5"),
    "classes at 16, 128, 1024, half the shorter class's evidence": ((16, 128, 1024), "0.5"),
    "two classes, at 256, from the prior": ((256,), "fixed"),
    "two classes, at 256, half the shorter class's evidence": ((256,), "0.5"),
}
RUNNER = """
import sys, json
import numpy as np
import omtl_mpi.algorithms.experts as experts
lengths = json.loads(sys.argv[1])
experts.LENGTHS = None if lengths is None else np.array(lengths, dtype=float)
experts.CLASS_PRIOR = sys.argv[2]
sys.argv = ["omtl-mpi", "run", *sys.argv[3:]]
import runpy
runpy.run_module("omtl_mpi", run_name="__main__")
"""
# `--by-length`: each expert's error on the instances a task meets at each stream length
BY_LENGTH = """
import atexit, sys
import numpy as np
import omtl_mpi.algorithms.experts as experts
EDGES = (0, 10, 30, 100, 300)
update, sums, seen = experts.ExpertVote.update, {}, {}
def counted(self, y, active):
    wrong = (self._votes != (y > 0.0)) & (y != 0.0)
    n = seen.setdefault(id(self), np.zeros(self.mistakes.shape[1]))
    at = np.searchsorted(EDGES, n[active], side="right") - 1
    for c in range(len(EDGES)):
        row = sums.setdefault(c, np.zeros(wrong.shape[0] + 1))
        row[:-1] += wrong[:, :, at == c].sum(axis=(1, 2))
        row[-1] += (y[:, at == c] != 0).sum()
    n[active] += (y != 0).sum(axis=0)
    return update(self, y, active)
experts.ExpertVote.update = counted
def report():
    for c, row in sorted(sums.items()):
        if row[-1]:
            top = f"{EDGES[c + 1] - 1}" if c + 1 < len(EDGES) else "on"
            print(f"| {EDGES[c]}-{top} | {int(row[-1])} | " + " | ".join(
                f"{v:.4f}" for v in row[:-1] / row[-1]) + " |")
atexit.register(report)
sys.argv = ["omtl-mpi", "run", *sys.argv[1:]]
import runpy
runpy.run_module("omtl_mpi", run_name="__main__")
"""
ORDERS = [["--seed", str(s)] for s in (0, 1, 2)]


def _make(path: str, cmd: list) -> None:
    if not os.path.exists(path):
        print("#", " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def sets(data_dir: str, landmine: str) -> tuple:
    """name -> (data options, [extra options of each run]) of every selection set of step 10,
    and name -> (tasks, seed, family options) of the personal draws among them."""
    out = {}
    for fam in ("identical", "clustered", "unrelated"):
        path = os.path.join(data_dir, f"testbed-{fam}.h5")
        _make(path, OMTL + ["data", "synth", "--family", fam, "--seed", "0", "-o", path])
        out[fam] = (["--data", path], ORDERS)
    out["Synthetic"] = (["--data", "synthetic"], ORDERS)
    mixture_sets, draws = groups_search.sets(data_dir, landmine)   # Landmine, K = 1,024, personal
    if "Landmine" in mixture_sets:
        path, runs = mixture_sets.pop("Landmine")
        out["Landmine"] = (["--data", path], runs)
    for fam in ("identical", "clustered", "unrelated"):
        path = os.path.join(data_dir, f"testbed-{fam}-normalized.h5")
        _make(path, OMTL + ["data", "synth", "--family", fam, "--seed", "0", "--normalize", "-o", path])
        out[f"{fam}, unit norm"] = (["--data", path], ORDERS)
    out["Synthetic, unit norm"] = (["--data", "synthetic", "--synth-normalize"], ORDERS)
    for seed in (100, 101, 102):
        csv, h5 = (os.path.join(data_dir, f"textlike-{seed}.{e}") for e in ("csv", "h5"))
        _make(csv, [sys.executable, os.path.join(ROOT, "experiments", "textlike.py"), "--seed",
                    str(seed), "--out", data_dir])
        _make(h5, OMTL + ["data", "import", "text-csv", csv, "--task-col", "task", "-o", h5])
        out[f"text-like {seed}"] = (["--data", h5], ORDERS)
    for name, (path, runs) in mixture_sets.items():
        out[name] = (["--data", path], runs)
    return out, draws


def run_error(runner: str, constants: list, data: list, extra: list) -> float:
    """The mean error of `omtl-mpi run DATA EXTRA` run by ``runner`` (a program that sets the
    candidate's module ``constants``, its first arguments, and then runs the command line)."""
    run = subprocess.run([sys.executable, "-c", runner, *constants, *data, *extra, "--json"],
                         capture_output=True, text=True)
    if run.returncode:
        raise SystemExit(f"failed: {' '.join(data + extra)}: {run.stderr.strip()[-400:]}")
    return json.loads(run.stdout)["mean_error"]


def main() -> None:
    args = groups_search.arguments(__doc__, (["--jobs"], dict(type=int, default=2,
                                                               help="runs at once")),
                                   (["--by-length"], dict(nargs=argparse.REMAINDER, metavar="RUN_OPTION",
                                    help="instead: `omtl-mpi run RUN_OPTION...` with today's "
                                         "vote, each expert's error by stream length")))
    if args.by_length:
        out = subprocess.run([sys.executable, "-c", BY_LENGTH, *args.by_length], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        rows = [line for line in out.splitlines() if line.startswith("| ")]
        n = rows[0].count("|") - 3
        print("| stream length so far | instances | " + " | ".join(
            f"expert {e + 1}" for e in range(n)) + " |")
        print("|---|---|" + "---|" * n)
        print("\n".join(rows))
        return
    run_candidates(args, CANDIDATES, RUNNER, lambda candidate: [
        json.dumps(list(candidate[0]) if candidate[0] else None), candidate[1]])


def search(doc: str, candidates: dict, constant: str, kind: str) -> None:
    """A search script's main: every candidate (label: the value, None or of type ``kind``,
    "int" or "float", given to the package's module constant ``constant``, "module.NAME", in
    the run's own process) on the selection sets, ``--jobs`` runs at once."""
    module, name = constant.rsplit(".", 1)
    runner = f"""
import sys
import {module} as module
module.{name} = None if sys.argv[1] == "None" else {kind}(sys.argv[1])
sys.argv = ["omtl-mpi", "run", *sys.argv[2:]]
import runpy
runpy.run_module("omtl_mpi", run_name="__main__")
"""
    args = groups_search.arguments(doc, (["--jobs"], dict(type=int, default=2,
                                                          help="runs at once")))
    run_candidates(args, candidates, runner, lambda candidate: [str(candidate)])


def run_candidates(args, candidates: dict, runner: str, constants) -> None:
    """The table's head, then a row for each candidate of ``args.only`` (all by default),
    ``constants(candidate)`` the arguments its ``runner`` reads."""
    todo, floors = table(args)
    for label, candidate in candidates.items():
        if not args.only or label in args.only:
            candidate_row(label, todo, floors, args.jobs, lambda data, extra: run_error(
                runner, constants(candidate), data, extra))


def table(args) -> tuple:
    """The selection sets (:func:`sets`) and their floors, with the table's head printed."""
    todo, draws = sets(args.data_dir, args.landmine)
    floors = personal.mean_floors(draws)
    groups_search.header(list(todo), floors, ["mean", "step 1's nine: mean",
                                              "personal: mean above the floor"])
    return todo, floors


def candidate_row(label: str, todo: dict, floors: dict, jobs: int, error) -> None:
    """A candidate's row: ``error(data options, run options)`` of every run of every set,
    ``jobs`` at once, each set's mean, their mean, the nine sets' of step 1 and the personal
    draws' distance to their floor."""
    names = list(todo)
    with ThreadPoolExecutor(jobs) as pool:
        errors = list(pool.map(lambda run: error(*run),
                               [(todo[n][0], extra) for n in names for extra in todo[n][1]]))
    row, i = [], 0
    for n in names:
        k = len(todo[n][1])
        row.append(float(np.mean(errors[i:i + k])))
        i += k
    above = np.mean([row[i] - floors[n] for i, n in enumerate(names) if n in floors])
    print(f"| {label} | " + " | ".join(f"{v:.4f}" for v in row)
          + f" | {np.mean(row):.5f} | {np.mean(row[:9]):.4f} | {above:+.4f} |", flush=True)

if __name__ == "__main__":
    main()
