#!/usr/bin/env python
"""Memory stays flat over a long run: every rank's resident memory sampled while it learns.

Usage: python experiments/memory_over_time.py [--ranks 4] [--samples 100000] [--algo c-admm]

Runs ``omtl-mpi run`` on the synthetic family (5 tasks x --samples instances, so --samples
rounds) under mpiexec, reads every rank's VmRSS from /proc twice a second, and prints each
rank's resident memory at 10%, 50% and 90% of the run's duration, with its growth from 10% to
90% beside what the per-round records the run must keep by design (predictions, mistakes,
timings: a few dozen bytes per round) account for. A leak would show as growth well beyond that.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# lib/omtlrun.py, how the maintainer scripts launch `omtl-mpi run` (alone or under mpiexec), lives
# in scripts/
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from lib.omtlrun import command  # noqa: E402


def _rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def _ranks_of(marker: str) -> list[int]:
    """Python processes of the job (their command line names our unique results file)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        if any(marker.encode() in c for c in cmd) and any(b"python" in c for c in cmd[:1]):
            pids.append(int(entry))
    return sorted(pids)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--samples", type=int, default=100000)
    ap.add_argument("--algo", default="c-admm")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "long-run.h5")
        cmd = command(["--algo", args.algo, "--synth-samples", args.samples, "--out", out, "--no-progress"],
                      args.ranks)
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        samples: dict[int, list] = {}
        while proc.poll() is None:
            for pid in _ranks_of(out):
                rss = _rss_mib(pid)
                if rss is not None:
                    samples.setdefault(pid, []).append((time.perf_counter() - t0, rss))
            time.sleep(0.5)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr.read())
        wall = time.perf_counter() - t0
    print(f"{args.algo}, {args.ranks} ranks, {args.samples} rounds (5 tasks): {wall:.0f} s", flush=True)
    # per-round records a rank keeps by design: 3 float64 timings, and for a worker its tasks'
    # int8 predictions and mistakes; rank 0 gathers everyone's at the end, after the last sample
    per_round = (3 * 8 + 5 * 2) * args.samples / 2 ** 20
    print(f"per-round records (timings, predictions, mistakes) of one rank: at most {per_round:.1f} MiB by design")
    print(f"{'process':>8} {'at 10%':>8} {'at 50%':>8} {'at 90%':>8} {'growth 10%->90%':>16}  (MiB)")
    for pid, rows in sorted(samples.items()):
        if len(rows) < 10:
            continue
        start, end = rows[0][0], rows[-1][0]

        def at(frac):
            moment = start + frac * (end - start)
            return min(rows, key=lambda r: abs(r[0] - moment))[1]
        print(f"{pid:>8} {at(0.1):8.1f} {at(0.5):8.1f} {at(0.9):8.1f} {at(0.9) - at(0.1):16.1f}")


if __name__ == "__main__":
    main()
