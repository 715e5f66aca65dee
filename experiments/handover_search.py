"""Step 10 (b), second round: the empirical-Bayes expert hands a task over to the multi-task
model once the task has seen H instances, on the selection sets.

Run it at revision c1dcaff (`git worktree add ../omtl-c1dcaff c1dcaff`), where the candidate's
code is in the package: each candidate sets ``omtl_mpi.algorithms.experts.HANDOVER`` in the
run's own process (one process, `omtl-mpi run`): None is the vote before the round; a number H
makes the empirical-Bayes expert's margin, for a task with at least H instances before the
round, the multi-task model's. H = 256 was chosen: it is experts.BAYES_HANDOVER since. The sets, the runs and the table are those of vote_search.py.

Usage: python experiments/handover_search.py [--data-dir DIR] [--landmine FILE] [--only NAME ...]
"""
import os
import sys
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "experiments"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import vote_search  # noqa: E402

CANDIDATES = {"today (no hand-over)": None, "hand over at 64 instances": 64,
              "hand over at 256 instances": 256, "hand over at 1024 instances": 1024}


def main() -> None:
    vote_search.search(__doc__, CANDIDATES, "omtl_mpi.algorithms.experts.HANDOVER", "int")


if __name__ == "__main__":
    main()
