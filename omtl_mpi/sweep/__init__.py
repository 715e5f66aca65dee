"""Sweeps: a TOML file of data sets x learners x topologies x grids x seeds, run as separate
mpiexec jobs with timeouts and recorded in an index that a re-run continues from."""
from .plan import Plan, Run, load_plan, rank_count
from .runner import Interrupted, read_index, run_sweep

__all__ = ["Plan", "Run", "load_plan", "rank_count", "Interrupted", "read_index", "run_sweep"]
