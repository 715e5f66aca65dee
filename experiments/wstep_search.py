"""Step 10 (a): an arow w-step whose r follows each task's margin noise, on the selection sets.

Run it at revision 144eae1, where the candidate's code is in the package (`git worktree add
../omtl-144eae1 144eae1`; it was not chosen, and the code went out after). Each candidate sets
``omtl_mpi.algorithms.wsteps.R_FROM_LOSS`` in the run's own process (one process, `omtl-mpi
run`): None is today's w-step (r = 0.2 m, m a task's first instances' mean squared norm); a
number c makes each task's r, when its instances reach 4, 8, 16, ..., c m times the mean of
(1 - y w.x)_+^2 over its instances so far (at least R_FLOOR m).
The sets, the runs and the table are those of vote_search.py.

Usage: python experiments/wstep_search.py [--data-dir DIR] [--landmine FILE] [--only NAME ...]
"""
import os
import sys
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "experiments"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import vote_search  # noqa: E402

CANDIDATES = {"today (r = 0.2 m)": None,
              "r = 0.5 m x mean squared margin loss": 0.5,
              "r = 1 m x mean squared margin loss": 1.0,
              "r = 2 m x mean squared margin loss": 2.0}


def main() -> None:
    vote_search.search(__doc__, CANDIDATES, "omtl_mpi.algorithms.wsteps.R_FROM_LOSS", "float")


if __name__ == "__main__":
    main()
