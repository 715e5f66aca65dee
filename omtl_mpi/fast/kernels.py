"""Compiled per-round steps of the ADMM learners (``--kernel numba``), beside the numpy reference.

At K = 5, d = 9 a round is a few hundred floating-point operations spread over a hundred numpy
calls, and each call costs more than its arithmetic (docs/DESIGN.md). The functions of
:mod:`._compiled` do the same steps in one compiled call each, and :mod:`.steps` puts them in
subclasses of the numpy learners' pieces:

* ``worker_step`` - predict, loss factor, Euclidean w-step and the message C of a block;
* ``dual_step`` - ``rho (u + v_k)``, the z-step and the next w-step's constant R;
* ``relationship_step`` - the Gram matrix of V, its eigendecomposition (LAPACK's dsyevd, as in
  relationship.py, called by numba), Omega and the exact variant's consensus matrix M (up to
  :data:`MAX_TASKS` tasks);
* ``consensus_matrix`` - M alone, from Omega's eigenpairs (the start, and after a restore);
* ``apply_consensus`` - the (u, V) step ``[u; V] = M C``;
* ``merge_tables`` - D-ADMM's freshest-row merge of the gossiped tables.

The formulas are those of the algorithms' ``admm``, ``wsteps``, ``losses`` and ``relationship``
modules, step by step and in the same order, but not to the bit: numpy and BLAS group the terms of
their sums differently. So the kernel is part of a run's configuration (``--kernel``), and
tests/test_kernels.py checks the two round by round (to 1e-12 of each array's scale) and over
whole runs where rounding is not amplified (to 1e-10), and the compiled one in-process
against MPI.

numba is imported only by :func:`load`: a run that does not use the kernels pays nothing for
them. Compiled code is cached on disk (numba's ``cache=True``: beside ``_compiled.py``, or in
the user's cache folder when that is read-only); the first :func:`load` after a change
compiles for about ten seconds, so the runtime lets one rank do it before the others load it,
and ``make setup`` does it once.
"""
from __future__ import annotations

import functools
import importlib.util
import sys

from ..algorithms.fortran import extension

# loss codes of worker_step, in the order of losses.LOSSES
LOSS_CODES = {"hinge": 0, "perceptron": 1, "logistic": 2, "squared-hinge": 3}
# Omega and the consensus matrix are compiled up to this many tasks: their K x K products are
# plain loops, and with 29 tasks on 4 ranks the numpy path (BLAS) was already faster
MAX_TASKS = 16


def compiled(signature):
    """Decorator of every compiled function of the package: compiled for one ``signature`` when
    its module is imported (or loaded from numba's on-disk cache), without the GIL, with IEEE
    arithmetic as numpy does it (no fast-math reassociation; division by zero gives inf or NaN
    instead of raising). Imports numba: use it only in the module that :func:`load` imports."""
    import numba
    return lambda fn: numba.njit(signature, cache=True, nogil=True, error_model="numpy",
                                 fastmath=False)(fn)


def available() -> bool:
    """Whether numba is installed (without importing it)."""
    return importlib.util.find_spec("numba") is not None


@functools.cache
def load():
    """The compiled kernels (:mod:`._compiled`): imports numba, compiles on the first call after
    a change to that file, then loads from numba's cache.

    Raises
    ------
    ImportError
        When numba is not installed.
    """
    # numba imports scipy.linalg.cython_blas when its array library loads (a check for a
    # BLAS), and scipy.linalg.cython_lapack for its first eigendecomposition (the address of
    # dsyevd). Through the scipy.linalg package, that costs a rank more CPU than numba itself
    # (fortran.py); lend numba those two extension modules, loaded alone, meanwhile.
    lent = []
    for name in ("cython_blas", "cython_lapack"):
        full = f"scipy.linalg.{name}"
        if full not in sys.modules and (module := extension(name)) is not None:
            sys.modules[full] = module
            lent.append(full)
    try:
        from . import _compiled
        _warm_up(_compiled)
    finally:
        for full in lent:
            sys.modules.pop(full, None)
    return _compiled


def _warm_up(compiled) -> None:
    """One call of the kernel that needs LAPACK, so that numba looks up dsyevd now."""
    import numpy as np
    K = 2
    compiled.relationship_step(np.eye(K), 0.0, 1.0, 1.0, 1.0, 1.0, np.empty(K), np.empty((K, K)),
                               np.empty((K + 1, K)))
