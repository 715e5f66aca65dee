"""Sweeps: a TOML file of data sets x learners x topologies x grids x seeds, run as separate
jobs with timeouts (local mpiexec, or Slurm job arrays) and recorded in an index that a re-run
continues from."""
from .plan import Plan, Run, load_plan, rank_count
from .runner import Interrupted, read_index, run_sweep

__all__ = ["Plan", "Run", "load_plan", "rank_count", "Interrupted", "read_index", "run_sweep"]
