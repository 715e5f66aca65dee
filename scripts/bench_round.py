#!/usr/bin/env python
"""Milliseconds per C-ADMM round: in-process and under mpiexec, medians of repeated runs.

Usage: python scripts/bench_round.py [--repeats 5] [--samples 2000] [--out docs/PERFORMANCE.md]

For K=5 tasks of random data with d=9 and d=512 it times, in one invocation:
  * a naive serial baseline: the same C-ADMM round written the obvious way (a Python loop over
    tasks, scipy.linalg.sqrtm and numpy.linalg.pinv), as in the paper's public serial code;
  * omtl-mpi in one process, and under mpiexec with 2 and K+1 ranks, with the numpy steps and
    with the compiled ones (--kernel numba), with the defaults otherwise (on a
    machine with fewer cores than K+1: the shared-memory transport, ranks that sleep while they
    wait, no address randomisation), plus K+1 ranks over MPI (polling; with and without
    address randomisation, with MPI's own busy wait, and sleeping from the first test).
Each figure is the median over --repeats runs of the per-round wall time of the learning loop
(reported by rank 0; start-up excluded), with the CPU seconds all ranks used per wall second.
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

import numpy as np
from scipy.linalg import sqrtm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from omtl_mpi.data import write_tasks  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from benchdata import make_random_tasks  # noqa: E402
from docsection import gauge_us, replace_section, speed_note  # noqa: E402
from omtlrun import MPIEXEC, command, report_of  # noqa: E402

K = 5
MPI = ("--transport", "mpi")
NUMBA = ("--kernel", "numba")


def make_data(folder, d, samples):
    return make_random_tasks(folder, K, d, samples, write_tasks)


def naive_round_ms(X, y, rounds):
    """The obvious serial implementation (per-task loop, sqrtm, pinv), paper variant."""
    d = X[0].shape[1]
    rho, l1, l2, l3, l4, eta = 0.1, 0.01, 0.1, 0.01, 0.01, float(np.sqrt(rounds))
    a = l1 + l3
    W, Z, V = np.zeros((d, K)), np.zeros((d, K)), np.zeros((d, K))
    u = np.zeros(d)
    omega = np.eye(K) / K
    t0 = time.perf_counter()
    for t in range(rounds):
        C = np.zeros((d, K))
        for k in range(K):
            x, lab = X[k][t], y[k][t]
            w = W[:, k]
            g = -lab * x if lab * (w @ x) < 1 else np.zeros(d)
            W[:, k] = (eta * w + rho * (u + V[:, k]) - g - Z[:, k]) / (rho + eta)
            C[:, k] = Z[:, k] + rho * W[:, k]
        u = a * C.sum(axis=1) / (a * (l2 + rho * K) + l2 * rho)
        pinv = np.linalg.pinv(omega)
        V = l2 * C / (l2 * (a + rho) + rho * K * a) + (l4 / 2) * (V @ pinv + V @ pinv.T)
        S = np.real(sqrtm(V.T @ V)) + 1e-8 * np.eye(K)
        omega = S / np.trace(S)
        for k in range(K):
            Z[:, k] += rho * (W[:, k] - u - V[:, k])
    return 1000.0 * (time.perf_counter() - t0) / rounds


def omtl_run(path, ranks, env_extra, extra_args=()):
    """One run; returns (ms per round, CPU seconds of all ranks per wall second of the run)."""
    cmd = command(["--data", path, "--json", "--no-progress", *extra_args], ranks if ranks > 1 else None)
    env = dict(os.environ, PYTHONUNBUFFERED="1", **env_extra)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"benchmark run failed: {' '.join(cmd)}\n{out.stderr}")
    report = report_of(out.stdout)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return report["ms_per_round"], cpu / wall


IDLE_CHILD = """
import os, sys, time, resource
from mpi4py import MPI
from omtl_mpi.comm.clock import PhaseClock
from omtl_mpi.comm.doorbell import Doorbells
from omtl_mpi.comm.waiting import wait
comm = MPI.COMM_WORLD
bell = os.environ.get("OMTL_MPI_WAIT") == "bell"
if bell:
    bells = Doorbells(comm, ring=range(1, comm.size), listen=[]) if comm.rank == 0 else Doorbells(comm, ring=[], listen=[0])
buf = bytearray(8)
cpu = 0.0
if comm.rank == 0:
    time.sleep(2.0)                       # the others wait 2 s for this message
    if bell:
        bells.ring_all()
    for r in range(1, comm.size):
        comm.Send([buf, MPI.BYTE], r)
else:
    before = resource.getrusage(resource.RUSAGE_SELF)
    if bell:
        bells.wait_all()
    wait(comm.Irecv([buf, MPI.BYTE], 0), PhaseClock(1))
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
if bell:
    bells.close()
# one printer: lines printed by several ranks at once can reach the launcher interleaved
cpus = comm.gather(cpu, root=0)
if comm.rank == 0:
    for value in cpus[1:]:
        print(f"CPU {value:.4f}", flush=True)
"""


def idle_cost(mode):
    """CPU seconds a rank burns while it waits 2 s for a message (median over the waiting ranks)."""
    env = dict(os.environ, OMTL_MPI_WAIT=mode, PYTHONPATH=ROOT)
    out = subprocess.run([MPIEXEC, "-n", "3", sys.executable, "-c", IDLE_CHILD], env=env,
                         capture_output=True, text=True, timeout=120)
    cpus = [float(line.split()[1]) for line in out.stdout.splitlines() if line.startswith("CPU")]
    return statistics.median(cpus) if cpus else float("nan")


def mpi_version():
    try:
        from mpi4py import MPI  # noqa: PLC0415
        return MPI.Get_library_version().splitlines()[0].strip()
    except Exception as exc:  # pragma: no cover - informational only
        return f"unknown ({exc})"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--samples", type=int, default=2000, help="instances per task (= rounds)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "PERFORMANCE.md"))
    args = ap.parse_args()
    before = gauge_us()

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for d in (9, 512):
            path, X, y = make_data(folder, d, args.samples)
            naive = statistics.median(naive_round_ms(X, y, min(args.samples, 500))
                                      for _ in range(args.repeats))
            rows.append((d, "naive serial baseline (per-task loop, sqrtm, pinv)", naive, None))
            for label, ranks, env, extra in (
                    ("omtl-mpi, 1 process", 1, {}, ()),
                    ("omtl-mpi, mpiexec -n 2", 2, {}, ()),
                    (f"omtl-mpi, mpiexec -n {K + 1}", K + 1, {}, ()),
                    ("omtl-mpi, 1 process, --kernel numba", 1, {}, NUMBA),
                    ("omtl-mpi, mpiexec -n 2, --kernel numba", 2, {}, NUMBA),
                    (f"omtl-mpi, mpiexec -n {K + 1}, --kernel numba", K + 1, {}, NUMBA),
                    (f"omtl-mpi, mpiexec -n {K + 1}, --kernel numba, Python round loop", K + 1,
                     {"OMTL_MPI_FUSED": "0"}, NUMBA),
                    (f"omtl-mpi, mpiexec -n {K + 1}, --transport mpi", K + 1, {}, MPI),
                    (f"omtl-mpi, mpiexec -n {K + 1}, --transport mpi --aslr on", K + 1, {},
                     (*MPI, "--aslr", "on")),
                    (f"omtl-mpi, mpiexec -n {K + 1}, --transport mpi --bind none", K + 1, {},
                     (*MPI, "--bind", "none")),
                    (f"omtl-mpi, mpiexec -n {K + 1}, --transport mpi, MPI's own busy Wait", K + 1,
                     {"OMTL_MPI_WAIT": "busy"}, MPI),
                    (f"omtl-mpi, mpiexec -n {K + 1}, --transport mpi, sleep from the first test",
                     K + 1, {"OMTL_MPI_WAIT_SPIN": "0"}, MPI)):
                if d != 9 and "sleep" in label:
                    continue            # slow, and the d=9 row makes the point
                # sleeping is ~100 times slower: one run shows it, and repeats would take minutes
                if "--kernel" not in extra:
                    extra = (*extra, "--kernel", "numpy")      # what auto picks at this length
                runs = [omtl_run(path, ranks, env, extra)
                        for _ in range(1 if "sleep" in label else args.repeats)]
                ms = statistics.median(r[0] for r in runs)
                cpu = statistics.median(r[1] for r in runs)
                rows.append((d, label, ms, cpu))
                print(f"d={d:<4} {label:<46} {ms:8.4f} ms/round  x{naive / ms:6.1f} vs naive  "
                      f"cpu/wall {cpu:4.2f}", flush=True)

    idle = {mode: idle_cost(mode) for mode in ("bell", "polite", "busy")}
    print(f"CPU seconds burnt during a 2 s wait: bell {idle['bell']:.3f}, polite "
          f"{idle['polite']:.3f}, busy {idle['busy']:.3f}")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "## C-ADMM: time per round",
        "",
        "Generated by `make bench` (`python scripts/bench_round.py "
        f"--repeats {args.repeats} --samples {args.samples}`) on {stamp}.",
        "",
        f"Machine: {os.cpu_count()} cores ({cpu_model()}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}, MPI: {mpi_version()}. "
        + speed_note(before),
        "",
        f"C-ADMM (variant exact, hinge, paper defaults, Omega updated every round), K={K} tasks of "
        f"random data, {args.samples} rounds. Each figure is the median over {args.repeats} runs of "
        "the learning loop's wall time per round on rank 0 (start-up excluded). *cpu/wall* is the "
        "CPU seconds used by all ranks together per wall second of the whole command: on this "
        f"{os.cpu_count()}-core machine a value near {os.cpu_count()} means every core is busy. "
        "Rows without options use the defaults (`--transport auto --aslr auto --bind auto`): "
        "with more ranks than cores that is the shared-memory transport, whose waiting ranks "
        "sleep and are left where the operating system puts them, without address "
        "randomisation. The *--transport mpi* rows poll MPI while they wait, and `--bind auto` "
        "then pins C-ADMM's ranks by weight (docs/DESIGN.md). Rows without *--kernel numba* "
        "compute with numpy (`--kernel numpy`, what `auto` picks for runs this short); the "
        "*--kernel numba* rows use the compiled steps (docs/DESIGN.md, \"Compiled steps\"); "
        "under mpiexec with more ranks than cores their rounds are fused (whole rounds in "
        "compiled code, docs/DESIGN.md, \"Fused rounds\"), except in the *Python round loop* "
        "row (`OMTL_MPI_FUSED=0`).",
        "",
        "| d | configuration | ms per round | speed-up vs naive | cpu/wall |",
        "|---|---|---|---|---|",
    ]
    naive_of = {d: ms for d, label, ms, cpu in rows if cpu is None}
    for d, label, ms, cpu in rows:
        speed = "1.0 (baseline)" if cpu is None else f"{naive_of[d] / ms:.1f}"
        lines.append(f"| {d} | {label} | {ms:.4f} | {speed} | {'' if cpu is None else f'{cpu:.2f}'} |")
    lines += [
        "",
        "Targets (issue 2, K=5, d=9, 2-core machine): at most 0.04 ms per round in one process, "
        "at most 0.12 ms per round under mpiexec with 6 ranks. The paper reports 2.01 ms per "
        "round for C-ADMM on its synthetic data.",
        "",
    ]
    lines += [
        "## Waiting without burning a core",
        "",
        "CPU seconds used by a rank that waits 2 s for a message from rank 0 (3 ranks, median of "
        "the 2 waiting ranks, same invocation): "
        f"**{idle['bell']:.3f} s** asleep on its FIFO doorbell (the shared-memory transport), "
        f"**{idle['polite']:.3f} s** with omtl-mpi's polite MPI wait (yield the CPU, then after "
        f"50 ms sleep with a growing delay) and **{idle['busy']:.3f} s** with MPI's own `Wait`.",
        "",
        "Within a round the polite MPI wait only yields (`sched_yield`), and sleeps only once a "
        "wait has lasted 50 ms: the smallest `time.sleep` on these machines lasts about 90 us, "
        "so sleeping from the first test (the row *sleep from the first test*) makes every "
        "round pay several of those. A rank asleep on its doorbell is woken by the kernel the "
        "moment its peer rings.",
        "",
    ]
    replace_section(args.out, "c-admm", "\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
