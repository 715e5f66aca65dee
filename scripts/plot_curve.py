#!/usr/bin/env python
"""Plot the mean cumulative error curve (the paper's Figure 1) of one or more results files.

Usage: python scripts/plot_curve.py RESULTS.h5 [MORE.h5 ...] -o curve.png
"""
import argparse
import os

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args()
    fig, ax = plt.subplots(figsize=(6, 4))
    for path in args.results:
        with h5py.File(path, "r") as f:
            curve = f["metrics/mean_curve"][()]
            label = f"{f.attrs['algo']} ({f.attrs['variant']}, {f.attrs['ranks']} ranks): {f.attrs['mean_error']:.4f}"
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
    main()
