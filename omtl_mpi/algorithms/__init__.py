"""Pure numpy learners: the math of one round, per role. No MPI, no files, no clocks."""
from .admm import AdmmParams, Consensus, TaskBlock
from .registry import REGISTRY, Algorithm, get

__all__ = ["AdmmParams", "Consensus", "TaskBlock", "REGISTRY", "Algorithm", "get"]
