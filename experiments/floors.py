"""Step 10's starting point on the harder personal draws: the defaults, the two baselines, the
membership floor and the group oracle, draw by draw.

Each draw is written by `omtl-mpi data synth --family personal` into --data-dir (kept if it is
there; scripts/lib/personal.py's draw, which prints its commands before the table), each
learner run by `omtl-mpi run --json` in one process (the file's order); the floor and the
oracle are scripts/lib/personal.py's. Prints a Markdown table of the mean per-task
error; runs nothing that chooses.

With --by-position, a second table per draw says where the defaults' distance to the floor
comes from: their error and the floor's on the instances at each position of a task's stream
(the first, the second, the 3rd-4th, ...), and that position's share of the distance between
the two mean per-task errors (an instance of a task with n instances weighs 1 / n in it).

Usage: python experiments/floors.py [--tasks 3000] [--dims 30] [--median 8]
                                    [--groups 8 16] [--seeds 100 101 102] [--data-dir DIR]
                                    [--by-position]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import h5py

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from lib import personal  # noqa: E402

DEFAULTS = "C-ADMM (defaults)"
LEARNERS = {DEFAULTS: ["--algo", "c-admm"],
            "Hashed personalisation (AdaGrad)": ["--algo", "hashed"],
            "AROW (single task)": ["--algo", "arow"]}
OMTL = [sys.executable, "-m", "omtl_mpi"]


def _mean_error(path: str, options: list) -> float:
    """`omtl-mpi run --data path OPTIONS --json`'s mean per-task error."""
    return json.loads(subprocess.run(OMTL + ["run", "--data", path, *options, "--json"],
                                     check=True, capture_output=True,
                                     text=True).stdout)["mean_error"]


def error(mistakes) -> float:
    return float(np.mean([m.mean() for m in mistakes]))


POSITIONS = (0, 1, 2, 4, 8, 16, 32)


def by_position(results: str, floor: list) -> None:
    """The defaults' and the floor's error at each position range of a task's stream, and the
    range's share of the distance between their mean per-task errors; ``results``: the
    defaults' results file of the draw, ``floor``: its membership floor's mistakes."""
    with h5py.File(results, "r") as f:
        offsets, mistakes = f["tasks/offsets"][()], f["metrics/mistakes"][()]
    lengths = np.diff(offsets)
    position = np.concatenate([np.arange(n) for n in lengths])
    weight = np.repeat(1.0 / lengths, lengths) / len(lengths)
    floor = np.concatenate(floor)
    print("| position in the task's stream | instances | C-ADMM (defaults) | membership floor "
          "| share of the distance |")
    print("|---|---|---|---|---|")
    for lo, hi in zip(POSITIONS, POSITIONS[1:] + (None,)):
        at = (position >= lo) & (position < (hi or np.inf))
        span = f"{lo + 1}" if hi == lo + 1 else f"{lo + 1}-{hi}" if hi else f"{lo + 1} on"
        print(f"| {span} | {at.sum()} | {mistakes[at].mean():.4f} | {floor[at].mean():.4f} | "
              f"{((mistakes[at] - floor[at]) * weight[at]).sum():+.4f} |")
    print(flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=3000)
    ap.add_argument("--dims", type=int, default=30)
    ap.add_argument("--median", type=float, default=8.0)
    ap.add_argument("--groups", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--seeds", type=int, nargs="+", default=[100, 101, 102])
    ap.add_argument("--data-dir", default="results/data")
    ap.add_argument("--by-position", action="store_true",
                    help="then, per draw, where the distance to the floor comes from")
    args = ap.parse_args()
    os.makedirs(args.data_dir, exist_ok=True)
    draws = {}                  # file name -> (groups, seed), drawn by lib.personal.draw
    for groups in args.groups:
        for seed in args.seeds:
            draws[f"personal-{args.tasks}-g{groups}-d{args.dims}-m{args.median:g}-{seed}.h5"] = \
                (groups, seed)
    personal.draw({name: os.path.join(args.data_dir, name) for name in draws})
    columns = [*LEARNERS, "membership floor", "group oracle"]
    print("| draw | " + " | ".join(columns) + " | defaults above the floor |")
    print("|---|" + "---|" * (len(columns) + 1))
    with tempfile.TemporaryDirectory() as tmp:
        kept = []               # --by-position: each draw's defaults' results file and floor
        for name, (groups, seed) in draws.items():
            family = personal.family(personal.FILE.match(name))
            path = os.path.join(args.data_dir, name)
            results = os.path.join(tmp, name)       # the defaults' results, for --by-position
            row = [_mean_error(path, options + (["--out", results] if args.by_position and
                                                label == DEFAULTS else []))
                   for label, options in LEARNERS.items()]
            floor = personal.membership_floor(args.tasks, seed, **family)
            row += [error(floor), error(personal.oracle(args.tasks, seed, **family))]
            print(f"| {groups} groups, draw {seed} | " + " | ".join(f"{v:.4f}" for v in row)
                  + f" | {row[0] - row[3]:+.4f} |", flush=True)
            if args.by_position:
                kept.append((groups, seed, results, floor))
        if kept:
            print()
        for groups, seed, results, floor in kept:
            print(f"{groups} groups, draw {seed}:\n")
            by_position(results, floor)


if __name__ == "__main__":
    main()
