#!/usr/bin/env python
"""Measure and write one generated section of docs/results: TABLE names the file,
docs/results/TABLE.md.

Usage: python scripts/results.py TABLE [OPTIONS]
       python scripts/results.py TABLE --help      (the table's options and defaults)

The tables and the Makefile targets that run them:

  synthetic  C-ADMM on the paper's synthetic data against each task alone   make results
  learners   every learner on it, error and ms per round under mpiexec       make results
  real       C-ADMM and D-ADMM on the real data sets found in DATA          make results
  paper      the paper's Tables 2-4 and Figure 1 (scripts/paper.toml)       make paper
  wstep      the adaptive w-steps against euclid and the single-task        make wstep
             learners (scripts/wstep.toml)
  quality    every learner on every local data set and the test beds, the   make quality
             evidence for the defaults (scripts/quality.toml)
  personal   many short streams in latent groups (scripts/personal.toml)    make quality
  asynchronous  --sync partial against --sync full, one                     make asynchronous
             worker 5 times slower (scripts/asynchronous.toml)
  minilm     TweetEval, hashed n-grams against MiniLM embeddings            make minilm
             (scripts/minilm.toml; needs the optional extra 'embed')

synthetic, learners and real always write their section; the others (a sweep, its report and
the section made from it) write it with --docs or --docs-file. Each section opens with the
stamp `make docs-check` reads. The code of each table is scripts/lib/TABLE.py.
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# this checkout's omtl_mpi, whatever is installed, and scripts/lib
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from lib import (asynchronous, learners, minilm, paper, personal, quality, real,  # noqa: E402
                 synthetic, wstep)

TABLES = {"synthetic": synthetic, "learners": learners, "real": real, "paper": paper,
          "wstep": wstep, "quality": quality, "personal": personal, "minilm": minilm,
          "asynchronous": asynchronous}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    tables = ap.add_subparsers(dest="table", metavar="TABLE", required=True,
                               help=", ".join(TABLES))
    for name, module in TABLES.items():
        # the module's doc less its Usage paragraph, which argparse writes itself
        summary, *rest = module.__doc__.strip().split("\n\n")
        rest = "\n\n".join(part for part in rest if not part.startswith("Usage:"))
        module.add_arguments(tables.add_parser(
            name, description=summary, epilog=rest or None,
            formatter_class=argparse.RawDescriptionHelpFormatter))
    return ap


def main(argv=None) -> None:
    args = parser().parse_args(argv)
    TABLES[args.table].main(args)


if __name__ == "__main__":
    main()
