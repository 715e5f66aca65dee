#!/usr/bin/env python
"""Numerical soak: long runs on hostile data, checking that nothing becomes NaN or inf, that
Omega stays symmetric PSD with trace 1 at every update, and that memory stays flat.

Usage: python experiments/soak.py [--rounds 1000000] [--mpi-rounds 100000] [--updates 1000000]

1. Omega updates alone (--updates times) on random, duplicate-task, all-zero, 1e150 and 1e-150
   task models, with eps from 0 to 1e3: every result checked.
2. Whole C-ADMM runs of --rounds rounds in one process (and --mpi-rounds under mpiexec with 4
   ranks) on K=3, d=3 streams: random; duplicate tasks; all-zero feature rows; features of norm
   1e150 and 1e-150; lambda4 = 0 and 1e3; Omega learned with omega-eps 0. Checked: the run succeeds, every array in
   the results file is finite, Omega symmetric PSD with trace 1; peak memory is reported.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from omtl_mpi.algorithms.relationship import Relationship, update_omega  # noqa: E402
from omtl_mpi.data import write_tasks  # noqa: E402

# lib/omtlrun.py, how the maintainer scripts launch `omtl-mpi run` (alone or under mpiexec), lives
# in scripts/
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from lib.omtlrun import command, report_of  # noqa: E402


def check_omega(om, where):
    assert np.all(np.isfinite(om)), f"{where}: non-finite Omega"
    assert np.array_equal(om, om.T), f"{where}: Omega not symmetric"
    assert abs(np.trace(om) - 1.0) < 1e-12, f"{where}: trace {np.trace(om)}"
    assert np.linalg.eigvalsh(om).min() > -1e-12, f"{where}: Omega not PSD"


def soak_omega(updates, seed=0):
    rng = np.random.default_rng(seed)
    K, d = 5, 4
    rel = Relationship.identity(K)
    kinds = ["random", "duplicate", "zero", "huge", "tiny"]
    t0 = time.perf_counter()
    for i in range(updates):
        kind = kinds[i % len(kinds)]
        V = rng.normal(size=(K, d))
        if kind == "duplicate":
            V[1:] = V[0]
        elif kind == "zero":
            V[:] = 0.0
        elif kind == "huge":
            V *= 1e150
        elif kind == "tiny":
            V *= 1e-150
        eps = (0.0, 1e-8, 1e3)[i % 3]
        rel = update_omega(V, eps, rel)
        check_omega(rel.omega, f"update {i} ({kind}, eps={eps})")
    return time.perf_counter() - t0


def scenario_data(folder, name, n):
    rng = np.random.default_rng(1)
    K, d = 3, 3
    X = [rng.normal(size=(n, d)) for _ in range(K)]
    y = [np.where(x @ np.ones(d) >= 0, 1, -1) for x in X]
    if name == "duplicate":
        X, y = [X[0]] * K, [y[0]] * K
    elif name == "zero-rows":
        for x in X:
            x[::3] = 0.0
    elif name == "norm-1e150":
        X = [x / np.linalg.norm(x, axis=1, keepdims=True) * 1e150 for x in X]
    elif name == "norm-1e-150":
        X = [x / np.linalg.norm(x, axis=1, keepdims=True) * 1e-150 for x in X]
    path = os.path.join(folder, f"{name}.h5")
    write_tasks(path, [f"t{k}" for k in range(K)], X, y)
    return path


def run_scenario(path, extra, rounds_label, ranks=None):
    out = path.replace(".h5", f"-out{ranks or 1}.h5")
    cmd = command(["--data", path, "--out", out, "--json", "--no-progress", *extra], ranks)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        return {"ok": False, "error": res.stderr.strip().splitlines()[-1:], "seconds": wall}
    with h5py.File(out) as f:
        finite = all(np.all(np.isfinite(ds[()])) for g in ("metrics", "model") for ds in f[g].values())
        check_omega(f["model/omega"][()], out)
    report = report_of(res.stdout)
    return {"ok": finite, "mean_error": report["mean_error"], "seconds": wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1_000_000)
    ap.add_argument("--mpi-rounds", type=int, default=100_000)
    ap.add_argument("--updates", type=int, default=1_000_000)
    args = ap.parse_args()
    secs = soak_omega(args.updates)
    print(f"Omega updates: {args.updates} checked, all symmetric PSD trace 1 ({secs:.0f} s)", flush=True)
    scenarios = [("random", []), ("duplicate", []), ("zero-rows", []), ("norm-1e150", []),
                 ("norm-1e-150", []), ("random", ["--lambda4", "0"]), ("random", ["--lambda4", "1000"]),
                 ("random", ["--relationship", "--omega-eps", "0"])]
    with tempfile.TemporaryDirectory() as folder:
        for rounds, ranks in ((args.rounds, None), (args.mpi_rounds, 4)):
            for name, extra in scenarios:
                path = scenario_data(folder, name, rounds)
                r = run_scenario(path, extra, rounds, ranks)
                print(f"{rounds} rounds, {ranks or 1} rank(s), {name} {' '.join(extra)}: {r}", flush=True)
                os.remove(path)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"largest child resident set: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
