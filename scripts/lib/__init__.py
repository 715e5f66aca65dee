"""The code behind the programs of scripts/, which is not a program itself: the generated
sections of the docs and their stamps (docsection), launching `omtl-mpi run` (omtlrun), the
paper's published figures (paperfigures), what the sweep-made tables share (sweeps), and one
module per table of scripts/results.py (synthetic, learners, real, paper, wstep, quality,
personal, minilm), each with ``add_arguments(parser)`` and ``main(args)``.

Imported with scripts/ on ``sys.path`` (``from lib import docsection``). Standard library only
at import time here and in docsection, so that scripts/docs_check.py runs without the project's
environment.
"""
