#!/usr/bin/env python
"""A worker's memory depends on its own tasks only: peak resident memory per rank against the
size of the whole data set.

Usage: python experiments/memory.py [--tasks 8] [--samples 10000] [--dims 640]

Writes a data set of --tasks tasks (each samples x dims float64), runs C-ADMM on tasks + 1 ranks
(one task per worker) and in one process, and prints every rank's peak resident memory
(``timing/peak_rss_mib`` of the results file, from the resource module).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from omtl_mpi.data import write_tasks  # noqa: E402

# lib/omtlrun.py, how the maintainer scripts launch `omtl-mpi run` (alone or under mpiexec), lives
# in scripts/
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from lib.omtlrun import command  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--samples", type=int, default=10000)
    ap.add_argument("--dims", type=int, default=640)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        data = os.path.join(folder, "big.h5")
        rng = np.random.default_rng(0)
        write_tasks(data, [f"t{k}" for k in range(args.tasks)],
                    [rng.normal(size=(args.samples, args.dims)) for _ in range(args.tasks)],
                    [rng.choice([-1, 1], size=args.samples) for _ in range(args.tasks)])
        per_task = args.samples * args.dims * 8 / 2 ** 20
        print(f"data set: {args.tasks} tasks x {per_task:.0f} MiB of features = "
              f"{args.tasks * per_task:.0f} MiB", flush=True)
        for ranks in (None, args.tasks + 1):
            out = os.path.join(folder, f"r{ranks}.h5")
            subprocess.run(command(["--data", data, "--out", out, "--no-progress"], ranks),
                           check=True, capture_output=True)
            with h5py.File(out) as f:
                rss = f["timing/peak_rss_mib"][()]
                roles = f["timing/roles"].asstr()[()]
            for role, mib in zip(roles, rss):
                print(f"{'1 process' if not ranks else f'{ranks} ranks':<10} {role:<28} peak {mib:7.0f} MiB",
                      flush=True)


if __name__ == "__main__":
    main()
