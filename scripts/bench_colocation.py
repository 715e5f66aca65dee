#!/usr/bin/env python
"""What sharing a core costs a rank's math: one C-ADMM worker round, alone and among others.

Usage: python scripts/bench_colocation.py [--repeats 3] [--rounds 20000] [--out docs/PERFORMANCE.md]

Each process runs --rounds rounds of a C-ADMM worker's math for one task at d=9 (predict and
w-step, then the z-step: the same TaskBlock calls as under mpiexec) and gives up the CPU after
each round (``sched_yield``), as a waiting rank does. Only the math is timed; the figure is the
median round of each process (after its first quarter of rounds, which warms up), then the median over processes and --repeats runs. Every process
is pinned to the same CPU. No MPI is involved:

* one process alone: the math with warm caches;
* N processes started independently (each its own ``python``, as mpiexec starts ranks): every
  interpreter has its own copy of its objects, so the core's caches hold N of them;
* N processes started independently without address-space layout randomisation (the
  ``ADDR_NO_RANDOMIZE`` personality, as ``omtl-mpi run --aslr auto`` starts ranks that share
  cores): their code sits at the same virtual addresses in every process;
* N processes forked from one parent after the imports: they share the parent's memory pages
  until they write to them, and its address layout.

The gap between the independently started rows and the forked one, at the same number of
processes taking turns on one core, is what separately started ranks pay; the row without
randomisation shows how much of it is the address layout (the core's branch predictors are
indexed by virtual address) rather than the copies of the interpreters' memory.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from docsection import replace_section, run_on  # noqa: E402


def worker_rounds(seed: int, rounds: int, cpu: int) -> float:
    """Median microseconds of one worker round's math in this process (pinned to ``cpu``)."""
    import time  # noqa: PLC0415

    import numpy as np  # noqa: PLC0415

    from omtl_mpi.algorithms.admm import AdmmParams, TaskBlock  # noqa: PLC0415
    os.sched_setaffinity(0, {cpu})
    block = TaskBlock(AdmmParams(eta=float(np.sqrt(rounds))), 1, 9)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rounds, 1, 1, 9))
    y = np.where(rng.random((rounds, 1, 1)) < 0.5, -1.0, 1.0)
    inv = np.ones((rounds, 1))
    down = rng.normal(scale=0.1, size=(rounds, 2, 9))
    took = np.empty(rounds)
    clock, yield_cpu = time.perf_counter, os.sched_yield
    for t in range(rounds):
        t0 = clock()
        block.predict_and_step(X[t], y[t], inv[t])
        block.dual_step(down[t, 0], down[t, 1:])
        took[t] = clock() - t0
        yield_cpu()
    return float(np.median(took[rounds // 4:])) * 1e6      # the first quarter warms up


def run_independent(n: int, rounds: int, cpu: int, randomised: bool = True) -> list[float]:
    """n separately started interpreters (without ASLR unless ``randomised``); each prints its
    median."""
    from omtl_mpi.runtime.addresses import turn_off  # noqa: PLC0415
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, __file__, "--child", str(i), "--rounds", str(rounds),
                               "--cpu", str(cpu)], stdout=subprocess.PIPE, text=True, env=env,
                              preexec_fn=None if randomised else turn_off)
             for i in range(n)]
    return [float(p.communicate(timeout=600)[0].strip()) for p in procs]


def run_forked(n: int, rounds: int, cpu: int) -> list[float]:
    """n processes forked from this one, after everything is imported."""
    import omtl_mpi.algorithms.admm  # noqa: F401,PLC0415  (import before forking)
    children = []
    for i in range(n):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:                          # child
            os.close(read)
            try:
                os.write(write, f"{worker_rounds(i, rounds, cpu)}".encode())
            finally:
                os._exit(0)
        os.close(write)
        children.append((pid, read))
    out = []
    for pid, read in children:
        with os.fdopen(read) as f:
            out.append(float(f.read()))
        os.waitpid(pid, 0)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=20000)
    ap.add_argument("--processes", type=int, default=4, help="processes sharing the CPU")
    ap.add_argument("--cpu", type=int, default=None, help="the CPU they share (default: the last allowed)")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "PERFORMANCE.md"))
    args = ap.parse_args()
    cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    if args.child is not None:
        print(worker_rounds(args.child, args.rounds, cpu))
        return
    n = args.processes
    rows = []
    for label, fn in (("1 process alone", lambda: run_independent(1, args.rounds, cpu)),
                      (f"{n} processes started independently (as mpiexec starts ranks)",
                       lambda: run_independent(n, args.rounds, cpu)),
                      (f"{n} processes started independently, without address randomisation",
                       lambda: run_independent(n, args.rounds, cpu, randomised=False)),
                      (f"{n} processes forked from one parent after the imports",
                       lambda: run_forked(n, args.rounds, cpu))):
        us = statistics.median(statistics.median(fn()) for _ in range(args.repeats))
        rows.append((label, us))
        print(f"{label:<62} {us:7.2f} us per worker round", flush=True)

    base = rows[0][1]
    lines = [
        "## Sharing a core: the same math, slower",
        "",
        f"Generated by `python scripts/bench_colocation.py --repeats {args.repeats} --rounds "
        f"{args.rounds} --processes {n}` on {run_on()}, Python {platform.python_version()}. One C-ADMM worker round's math "
        "(one task, d=9: predict, w-step, z-step), timed alone in each process; every process is "
        "pinned to the same CPU and yields it after each round, as a waiting rank does; no MPI. "
        f"Median round of each process (its first quarter of rounds left out as warm-up), median "
        f"over processes and {args.repeats} runs.",
        "",
        "| processes taking turns on one CPU | us per worker round | vs alone |",
        "|---|---|---|",
    ]
    lines += [f"| {label} | {us:.2f} | {us / base:.2f}x |" for label, us in rows]
    replace_section(args.out, "colocation", "\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
