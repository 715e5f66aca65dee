#!/usr/bin/env python
"""Plot the mean cumulative error curve (the paper's Figure 1) of one or more results files.

Usage: python scripts/plot_curve.py RESULTS.h5 [MORE.h5 ...] -o curve.png

RESULTS.h5 is what `omtl-mpi run --out RESULTS.h5` writes; `make demo` plots its run this way.
"""
import argparse
import os
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_curve(path: str) -> tuple:
    """The mean cumulative error curve of a results file and its legend; stops with one line
    if the file is missing or is not a results file."""
    if not os.path.isfile(path):
        raise SystemExit(f"error: {path}: no such file")
    try:
        with h5py.File(path, "r") as f:
            curve = f["metrics/mean_curve"][()]
            label = (f"{f.attrs['algo']} ({f.attrs['variant']}, {f.attrs['ranks']} ranks): "
                     f"{f.attrs['mean_error']:.4f}")
    except (OSError, KeyError):          # not HDF5 (OSError), or HDF5 without a run's entries
        raise SystemExit(f"error: {path}: not a results file of `omtl-mpi run --out`") from None
    return curve, label


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="results files (omtl-mpi run --out)")
    ap.add_argument("-o", "--out", required=True, help="the PNG to write")
    args = ap.parse_args()
    curves = [read_curve(path) for path in args.results]
    fig, ax = plt.subplots(figsize=(6, 4))
    for curve, label in curves:
        ax.plot(range(1, len(curve) + 1), curve, label=label)
    ax.set_xlabel("round")
    ax.set_ylabel("mean cumulative error rate")
    ax.set_xscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    tmp = args.out + ".tmp.png"
    fig.savefig(tmp, dpi=120)
    os.replace(tmp, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
