#!/usr/bin/env python
"""Time per round of C-ADMM, D-ADMM and D-PSGD over MPI, bytes sent, and D-ADMM's growth with K.

Usage: python scripts/bench_decentralised.py [--repeats 3] [--samples 1500] [--out docs/PERFORMANCE.md]

Part 1: K=5 tasks of random data with d=9 and d=784; C-ADMM on K+1 ranks, D-ADMM and D-PSGD on
ring and fully connected topologies on K ranks. Median over --repeats runs of the learning loop's
wall time per round (rank 0), the median per-rank split into compute / communicate / wait, and
the bytes each rank sends per round (from the fixed message sizes: C-ADMM worker K_w d doubles up,
server (K_w + 1) d down per worker; D-ADMM K (2d + 1) doubles to each neighbour; D-PSGD d doubles
to each neighbour).
The ADMM learners run with --kernel numpy and --kernel numba.
Part 2: D-ADMM ring (both kernels) with K = 5, 29, 64 tasks (d=9) block-distributed over a
fixed 4 ranks.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
from datetime import datetime, timezone

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from benchdata import make_random_tasks  # noqa: E402
from docsection import gauge_us, replace_section, speed_note  # noqa: E402
from omtlrun import run_json  # noqa: E402
from omtl_mpi.data import write_tasks  # noqa: E402
from omtl_mpi.topology import load_topology  # noqa: E402

def make_data(folder, K, d, samples):
    return make_random_tasks(folder, K, d, samples, write_tasks)[0]


def one_run(path, algo, ranks, topology, folder, kernel=None):
    out = os.path.join(folder, "r.h5")
    extra = ["--kernel", kernel] if kernel else []
    report = run_json(["--data", path, "--algo", algo, "--topology", topology, "--out", out, *extra],
                      ranks)
    with h5py.File(out) as f:
        split = f["timing/seconds"][()].mean(axis=1).mean(axis=0) * 1000.0   # phases, ms
    where = report["transport"] + (", fused" if report.get("loop") == "fused" else "")
    return report["ms_per_round"], split, where


def bytes_per_rank(algo, K, d, ranks, topology):
    """Bytes each rank sends per round (max over ranks), from the fixed message sizes."""
    if algo == "c-admm":
        kw = -(-K // (ranks - 1))
        return max(kw * d * 8, sum((-(-K // (ranks - 1)) + 1) * d * 8 for _ in range(ranks - 1)))
    topo = load_topology(topology, ranks)
    deg = int(topo.degrees.max())
    per_msg = K * (2 * d + 1) * 8 if algo == "d-admm" else d * 8
    return per_msg * deg


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--samples", type=int, default=1500)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "PERFORMANCE.md"))
    args = ap.parse_args()
    before = gauge_us()
    K = 5
    table, scaling = [], []
    with tempfile.TemporaryDirectory() as folder:
        for d in (9, 784):
            path = make_data(folder, K, d, args.samples)
            for algo, ranks, topology, kernel in (
                    ("c-admm", K + 1, "ring", "numpy"), ("c-admm", K + 1, "ring", "numba"),
                    ("d-admm", K, "ring", "numpy"), ("d-admm", K, "ring", "numba"),
                    ("d-admm", K, "full", "numpy"), ("d-admm", K, "full", "numba"),
                    ("d-psgd", K, "ring", None), ("d-psgd", K, "full", None)):
                runs = [one_run(path, algo, ranks, topology, folder, kernel)
                        for _ in range(args.repeats)]
                ms = statistics.median(r[0] for r in runs)
                split = np.median(np.stack([r[1] for r in runs]), axis=0)
                nbytes = bytes_per_rank(algo, K, d, ranks, topology)
                label = (f"{algo} ({'server' if algo == 'c-admm' else topology})"
                         + (f", --kernel {kernel}" if kernel else ""))
                table.append((d, label, f"{ranks} ({runs[0][2]})", ms, split, nbytes))
                print(f"d={d:<4} {label:<18} {ranks} ranks {ms:8.4f} ms/round  "
                      f"split {np.round(split, 4)}  {nbytes} B/rank/round", flush=True)
        for k_tasks in (5, 29, 64):
            path = make_data(folder, k_tasks, 9, args.samples)
            for kernel in ("numpy", "numba"):
                runs = [one_run(path, "d-admm", 4, "ring", folder, kernel) for _ in range(args.repeats)]
                ms = statistics.median(r[0] for r in runs)
                split = np.median(np.stack([r[1] for r in runs]), axis=0)
                nbytes = bytes_per_rank("d-admm", k_tasks, 9, 4, "ring")
                scaling.append((k_tasks, kernel, f"{ms:.4f} ({runs[0][2]})", split, nbytes))
                print(f"K={k_tasks:<3} d-admm ring 4 ranks --kernel {kernel} {ms:8.4f} ms/round "
                      f"split {np.round(split, 4)}", flush=True)

    note = speed_note(before)
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## Decentralised learners: time per round",
        "",
        f"Generated by `python scripts/bench_decentralised.py --repeats {args.repeats} --samples "
        f"{args.samples}` on {stamp}, {os.cpu_count()} cores, {platform.system()} "
        f"{platform.release()}. {note} K=5 tasks of random data, {args.samples} rounds; every figure is "
        f"a median over {args.repeats} runs; compute / communicate / wait are the mean over ranks "
        "of each phase's mean ms per round. Runs use the default `--transport auto`; the "
        "transport it chose is in brackets (shm: one node's shared memory, ranks asleep while "
        "they wait; mpi: MPI messages, ranks polling; fused: whole rounds in compiled code, "
        "docs/DESIGN.md). The ADMM learners run with the numpy steps (`--kernel numpy`, what "
        "`auto` picks for runs this short) and with the compiled ones (`--kernel numba`); D-PSGD "
        "has no compiled steps. The bytes are those of the messages, whichever way they travel.",
        "",
        "| d | learner | ranks (transport) | ms per round | compute | communicate | wait | bytes sent per rank per round |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d, label, ranks, ms, split, nbytes in table:
        lines.append(f"| {d} | {label} | {ranks} | {ms:.4f} | {split[0]:.4f} | {split[1]:.4f} | "
                     f"{split[2]:.4f} | {nbytes} |")
    lines += [
        "",
        "Paper (its own hardware): D-ADMM 1.03 ms (ring) and 1.05 ms (full) per round on synthetic "
        "data, 17.76 / 30.49 ms on 512-d MNIST features; D-PSGD 3.28 ms and 184 ms. Targets of "
        "issue 3 on these 2-core machines: D-ADMM ring at most 0.15 ms per round at d=9 and at "
        "most 0.5 ms at d=784.",
        "",
        "### D-ADMM ring, d=9, growing K over a fixed 4 ranks",
        "",
        "With `--kernel numba` the Omega update and the (u, V) step stay numpy's (BLAS) above "
        "16 tasks (`kernels.MAX_TASKS`); the other steps are compiled.",
        "",
        "| tasks K | kernel | ms per round (transport) | compute | communicate | wait | bytes sent per rank per round |",
        "|---|---|---|---|---|---|---|",
    ]
    for k_tasks, kernel, ms, split, nbytes in scaling:
        lines.append(f"| {k_tasks} | {kernel} | {ms} | {split[0]:.4f} | {split[1]:.4f} | {split[2]:.4f} | {nbytes} |")
    replace_section(args.out, "decentralised", "\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
