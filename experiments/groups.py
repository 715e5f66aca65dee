"""Step 8 of the defaults protocol (experiments/PROTOCOL.md): sharing among many short streams.

    python experiments/groups.py [--raw ../shared/data] [--seeds 0 1 2] [--folder DIR] [--mixture]

Candidates for how the vote learns from the other tasks, compared by the protocol's rule on
its selection sets: the nine of steps 1-7, and the skewed personal family (`omtl-mpi data synth
--family personal`: K = 2,000 tasks in 4 latent groups, stream lengths log-normal with median
15) drawn with the seeds 100, 101 and 102, which no table of docs/ reports (they report the
draws 0, 1 and 2). Each personal draw is run in one stream order (draw 100 + i in order i of
`--seeds`); the other sets in every order of `--seeds`. Every run is C-ADMM with the defaults
in one process (`omtl_mpi.run_streams`, what `omtl-mpi run` computes), the candidate set up by
replacing the vote's list of experts or a constant of `omtl_mpi/algorithms/bayes.py`
(the package has no switch for them).

The candidates: today's vote (multi-task, shared, related); the empirical-Bayes expert of
bayes.py added last (the prior 0.99 stays on the multi-task model) or first (the prior on it);
and, for the first, its label noise s2 at 0.5 and 1.0 beside 0.7. The empirical-Bayes expert
is used only with more tasks than features, so on seven of the ten sets every candidate is
today's vote, to the bit.

``--mixture``: the second round of the step, after the vote had that expert first: its prior
one Gaussian or a mixture (omtl_mpi/algorithms/mixture.py), by the components and EM steps of
``mixture.GROUPS`` and ``mixture.EM_STEPS`` (GROUPS = 1: the Gaussian). It prints a Markdown table: the mean final cumulative error on every
set (over the seeds), the mean over the sets (what the rule compares), the spread of the
per-seed means over the sets (largest less smallest; the personal draw 100 + i counts as seed
i), and each candidate's mean error over all instances and ms per round on the personal draws.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import omtl_mpi                                                       # noqa: E402
from omtl_mpi.algorithms import admm, bayes, cadmm, dadmm, experts, mixture  # noqa: E402
from omtl_mpi.data.source import FileSource, SyntheticSource          # noqa: E402

TESTBEDS = ("identical", "clustered", "unrelated")
PERSONAL_DRAWS = (100, 101, 102)
M, S, R, B = "multi-task", "shared", "related", experts.BAYES
# label, the vote's experts where the empirical-Bayes expert can be used (None: today's), s2
CANDIDATES = [("today's vote (multi-task, shared, related)", None, bayes.NOISE),
              ("+ empirical Bayes, last", (M, S, R, B), bayes.NOISE),
              ("+ empirical Bayes, first", (B, M, S, R), bayes.NOISE),
              ("+ empirical Bayes, first, s2 = 0.5", (B, M, S, R), 0.5),
              ("+ empirical Bayes, first, s2 = 1.0", (B, M, S, R), 1.0)]
# --mixture: label, the mixture's components (1: the Gaussian prior) and EM steps an estimate
MIXTURES = [("empirical Bayes first, one Gaussian prior", 1, 0),
            ("the same, a mixture prior, G = 8, 10 EM steps", 8, 10),
            ("the same, G = 8, 20 EM steps", 8, 20),
            ("the same, G = 4, 10 EM steps", 4, 10),
            ("the same, G = 16, 10 EM steps", 16, 10)]


def use(order, noise: float) -> None:
    """Make every learner built from now on vote with ``order`` (None: today's three
    experts) where the empirical-Bayes expert can be used, with label noise ``noise``."""
    def vote_experts(n_tasks, dim, class_weight="none"):
        return order if order is not None and bayes.used(n_tasks, dim, class_weight) else experts.EXPERTS
    for module in (admm, cadmm, dadmm, experts):
        module.vote_experts = vote_experts
    bayes.NOISE = noise


def omtl(args: list) -> None:
    done = subprocess.run([sys.executable, "-m", "omtl_mpi", *args], capture_output=True,
                          text=True, timeout=3600, env=dict(os.environ, PYTHONPATH=ROOT))
    if done.returncode != 0:
        raise SystemExit(f"omtl-mpi {' '.join(args)} failed:\n{done.stderr.strip()}")


def selection_sets(folder: str, raw: str) -> list:
    """(label, [(source, stream seed or None to use each of --seeds)]) of every set."""
    sets = []
    for normal in (False, True):
        tail = ", unit norm" if normal else ""
        for family in TESTBEDS:
            path = os.path.join(folder, f"{family}{'-normalized' if normal else ''}.h5")
            if not os.path.exists(path):
                omtl(["data", "synth", "--family", family, "--seed", "0", "-o", path]
                     + (["--normalize"] if normal else []))
            sets.append((family + tail, [(path, None)]))
        sets.append(("Synthetic" + tail, [(("synthetic", normal), None)]))
        if not normal:
            mat = os.path.join(raw, "landmine", "LandmineData.mat")
            path = os.path.join(folder, "landmine.h5")
            if os.path.exists(mat):
                if not os.path.exists(path):
                    omtl(["data", "import", "landmine", mat, "-o", path])
                sets.append(("Landmine", [(path, None)]))
            else:
                print(f"(left out Landmine: {mat} not found)", file=sys.stderr)
    draws = []
    for i, seed in enumerate(PERSONAL_DRAWS):
        path = os.path.join(folder, f"personal-{seed}.h5")
        if not os.path.exists(path):
            omtl(["data", "synth", "--family", "personal", "--seed", str(seed), "-o", path])
        draws.append((path, i))
    sets.append(("personal, K = 2,000 (draws 100-102)", draws))
    return sets


def streams(source):
    """The streams (X list, y list) of a set's source."""
    if isinstance(source, tuple):
        src = SyntheticSource(5, 10000, 0, normalize=source[1])
    else:
        src = FileSource(source)
    data = src.load(np.arange(src.meta().n_tasks))
    return data.X, data.y


def run(source, seed: int):
    X, y = streams(source)
    res = omtl_mpi.run_streams(X, y, algo="c-admm", seed=seed)
    return res.mean_error, res.overall_error, res.ms_per_round


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--raw", default=os.path.join(ROOT, "..", "shared", "data"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--folder", help="where the sets are drawn (default: a temporary folder)")
    parser.add_argument("--mixture", action="store_true",
                        help="compare the empirical-Bayes expert's priors (the step's second round)")
    args = parser.parse_args()
    candidates = ([(label, groups, steps) for label, groups, steps in MIXTURES] if args.mixture
                  else CANDIDATES)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.folder or tmp
        os.makedirs(folder, exist_ok=True)
        sets = selection_sets(folder, args.raw)
        print("| candidate | " + " | ".join(label for label, _ in sets)
              + " | mean | spread over seeds | personal: over all instances | personal: ms per round |")
        print("|" + "---|" * (len(sets) + 5))
        for label, first, second in candidates:
            if args.mixture:
                mixture.GROUPS, mixture.EM_STEPS = first, second
            else:
                use(first, second)
            row, personal, by_seed = [], [], []
            for name, runs in sets:
                scores = []
                for source, seed in runs:
                    for s in ([seed] if seed is not None else args.seeds):
                        start = time.perf_counter()
                        scores.append(run(source, s))
                        print(f"  {label} / {name} / seed {s}: {scores[-1][0]:.4f} "
                              f"({time.perf_counter() - start:.1f} s)", file=sys.stderr)
                row.append(np.mean([s[0] for s in scores]))
                by_seed.append([s[0] for s in scores])      # seed (or draw) i in place i
                if name.startswith("personal"):
                    personal = np.mean(scores, axis=0)
            # the spread: of the per-seed means over the sets (seed i: draw i of the personal family)
            per_seed = np.mean(by_seed, axis=0)
            print(f"| {label} | " + " | ".join(f"{v:.4f}" for v in row)
                  + f" | {np.mean(row):.4f} | {np.ptp(per_seed):.4f} | {personal[1]:.4f}"
                  + f" | {personal[2]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
