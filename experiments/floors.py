"""Step 10's starting point on the harder personal draws: the defaults, the two baselines, the
membership floor and the group oracle, draw by draw.

Each draw is written by `omtl-mpi data synth --family personal` into --data-dir (kept if it is
there; scripts/lib/personal.py's draw, which prints its commands before the table), each
learner run by `omtl-mpi run --json` in one process (the file's order); the floor and the
oracle are scripts/lib/personal.py's. Prints a Markdown table of the mean per-task
error; runs nothing that chooses.

Usage: python experiments/floors.py [--tasks 3000] [--dims 30] [--median 8]
                                    [--groups 8 16] [--seeds 100 101 102] [--data-dir DIR]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from lib import personal  # noqa: E402

LEARNERS = {"C-ADMM (defaults)": ["--algo", "c-admm"],
            "Hashed personalisation (AdaGrad)": ["--algo", "hashed"],
            "AROW (single task)": ["--algo", "arow"]}
OMTL = [sys.executable, "-m", "omtl_mpi"]


def error(mistakes) -> float:
    return float(np.mean([m.mean() for m in mistakes]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=3000)
    ap.add_argument("--dims", type=int, default=30)
    ap.add_argument("--median", type=float, default=8.0)
    ap.add_argument("--groups", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--seeds", type=int, nargs="+", default=[100, 101, 102])
    ap.add_argument("--data-dir", default="results/data")
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
    for name, (groups, seed) in draws.items():
        family = personal.family(personal.FILE.match(name))
        path = os.path.join(args.data_dir, name)
        row = [json.loads(subprocess.run(OMTL + ["run", "--data", path, *options, "--json"],
                                         check=True, capture_output=True,
                                         text=True).stdout)["mean_error"]
               for options in LEARNERS.values()]
        row += [error(personal.membership_floor(args.tasks, seed, **family)),
                error(personal.oracle(args.tasks, seed, **family))]
        print(f"| {groups} groups, draw {seed} | " + " | ".join(f"{v:.4f}" for v in row)
              + f" | {row[0] - row[3]:+.4f} |", flush=True)

if __name__ == "__main__":
    main()
