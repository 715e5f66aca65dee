"""Compiled per-round steps of the ADMM learners (``--kernel numba``), beside the numpy reference.

At K = 5, d = 9 a round is a few hundred floating-point operations spread over a hundred numpy
calls, and each call costs more than its arithmetic (docs/PERFORMANCE.md). The functions of
:mod:`._compiled` do the same steps in one compiled call each:

* ``worker_step`` - predict, loss factor, Euclidean w-step and the message C of a block;
* ``dual_step`` - ``rho (u + v_k)``, the z-step and the next w-step's constant R;
* ``relationship_step`` - the Gram matrix of V, its eigendecomposition (LAPACK's dsyevd, as in
  relationship.py, called by numba), Omega and the exact variant's consensus matrix M (up to
  :data:`MAX_TASKS` tasks);
* ``consensus_matrix`` - M alone, from Omega's eigenpairs (the start, and after a restore);
* ``apply_consensus`` - the (u, V) step ``[u; V] = M C``;
* ``merge_tables`` - D-ADMM's freshest-row merge of the gossiped tables.

The formulas are those of :mod:`.admm`, :mod:`.wsteps`, :mod:`.losses` and :mod:`.relationship`,
step by step and in the same order, but not to the bit: numpy and BLAS group the terms of
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
import hashlib
import importlib.util
import os
import sys

from .fortran import extension

# loss codes of worker_step, in the order of losses.LOSSES
LOSS_CODES = {"hinge": 0, "perceptron": 1, "logistic": 2, "squared-hinge": 3}
# relationship_step's return codes
OK, RESCALE, STABLE = 0, 1, 2
# Omega and the consensus matrix are compiled up to this many tasks: their K x K products are
# plain loops, and with 29 tasks on 4 ranks the numpy path (BLAS) was already faster
MAX_TASKS = 16


def compiled(signature):
    """Decorator of every compiled function of the package: compiled for one ``signature`` when
    its module is imported (or loaded from numba's on-disk cache), without the GIL, with IEEE
    arithmetic as numpy does it (no fast-math reassociation; division by zero gives inf or NaN
    instead of raising). Imports numba: use it only in the modules that :func:`load` and
    runtime/fused.py import."""
    import numba
    return lambda fn: numba.njit(signature, cache=True, nogil=True, error_model="numpy",
                                 fastmath=False)(fn)


def sources_digest(*names: str) -> int:
    """A 64-bit digest of the files ``names`` (paths relative to the package folder), for the
    staleness check of :func:`refresh`."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for name in names:
        with open(os.path.join(root, name), "rb") as f:
            digest.update(f.read())
    return int.from_bytes(digest.digest()[:8], "little", signed=True)


def refresh(module) -> None:
    """Recompile ``module``'s functions if they were cached before a change to a file they
    take code or constants from.

    numba's cache checks only the file that defines a function, not the files of the functions
    it calls or of the globals it froze in (numba issue #9304), so every compiled module
    records ``BUILT_FROM = sources_digest(...)`` of those files and a compiled ``built_from()``
    returning it: a cached ``built_from`` returns the digest of the files at compile time.
    Functions are recompiled (and cached again) in definition order, so that callees come
    before their callers.
    """
    if module.built_from() == module.BUILT_FROM:
        return
    from numba.core.registry import CPUDispatcher
    for value in list(vars(module).values()):
        if isinstance(value, CPUDispatcher) and value.py_func.__module__ == module.__name__:
            value.recompile()


# what each level of compiled code is compiled from (the steps, and the fused rounds over
# them), and the folder whose numba cache (__pycache__) holds it
_SOURCES = {
    "kernels": ("algorithms/_compiled.py", "algorithms/kernels.py", "algorithms/relationship.py"),
    "fused": ("algorithms/_compiled.py", "algorithms/kernels.py", "algorithms/relationship.py",
              "comm/_compiled.py", "runtime/_fused.py"),
}
_CACHE_FOLDER = {"kernels": "algorithms", "fused": "runtime"}


def _stamp(level: str) -> tuple[str, str]:
    """Where the stamp of ``level`` ("kernels" or "fused") lives, and what it must say: a digest
    of the sources, the numba and Python versions and the cache folder numba was told to use."""
    from importlib.metadata import version
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256(f"{version('numba')} {sys.version} "
                            f"{os.environ.get('NUMBA_CACHE_DIR', '')}".encode())
    digest.update(sources_digest(*_SOURCES[level]).to_bytes(8, "little", signed=True))
    # beside numba's own cache files: a cache folder removed takes its stamp with it
    folder = os.path.join(root, _CACHE_FOLDER[level], "__pycache__")
    return os.path.join(folder, f"numba-{level}.stamp"), digest.hexdigest()


def cache_ready(level: str) -> bool:
    """Whether this process last loaded ``level`` from these very sources (so numba's cache
    holds it and nobody will compile): then every rank of a job can load at once instead of
    rank 0 first. False whenever in doubt (no stamp, another version, no numba)."""
    try:
        return _stamp_matches(*_stamp(level))
    except Exception:
        return False


def _stamp_matches(path: str, expected: str) -> bool:
    try:
        with open(path) as f:
            return f.read() == expected
    except OSError:
        return False


def mark_cache_ready(level: str) -> None:
    """Record that ``level`` loaded (compiled if it had to) from the current sources; silently
    nothing where the package folder is not writable (ranks then load rank 0 first)."""
    try:
        path, expected = _stamp(level)
        if not _stamp_matches(path, expected):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(expected)
            os.replace(tmp, path)
    except Exception:
        pass


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
        refresh(_compiled)
        _warm_up(_compiled)
    finally:
        for full in lent:
            sys.modules.pop(full, None)
    mark_cache_ready("kernels")
    return _compiled


def _warm_up(compiled) -> None:
    """One call of the kernel that needs LAPACK, so that numba looks up dsyevd now."""
    import numpy as np
    K = 2
    compiled.relationship_step(np.eye(K), 0.0, 1.0, 1.0, 1.0, 1.0, np.empty(K), np.empty((K, K)),
                               np.empty((K + 1, K)))
