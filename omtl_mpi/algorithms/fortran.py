"""The BLAS and LAPACK routines the learners call directly: ``dger`` (AROW's in-place rank-one
update) and ``dgesdd`` (the thin SVD of the Omega update). They are scipy's own wrappers (the
same function objects, so the same bits), loaded from scipy's folder without importing
``scipy.linalg``, whose import costs every rank about as much CPU as numpy, h5py and mpi4py
together (docs/DESIGN.md, "Start-up"); the normal import where a scipy build will not load
them alone.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def extension(name: str):
    """scipy.linalg's extension module ``name``, loaded without the scipy.linalg package."""
    full = f"scipy.linalg.{name}"
    if full in sys.modules:
        return sys.modules[full]
    try:
        spec = importlib.util.find_spec("scipy")     # finds the package, does not import it
        folder = os.path.join(os.path.dirname(spec.origin), "linalg")
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, name + suffix)
            if os.path.isfile(path):
                module = importlib.util.module_from_spec(
                    importlib.util.spec_from_file_location(full, path))
                module.__spec__.loader.exec_module(module)
                # CPython registers the module under its name; leave sys.modules as it was, so
                # that a later `import scipy.linalg` binds the module to its package as usual
                # (it gets the same functions: an extension module is initialised once)
                sys.modules.pop(full, None)
                return module
    except (ImportError, OSError, AttributeError, TypeError):
        pass
    return None


def _load():
    fblas, flapack = extension("_fblas"), extension("_flapack")
    if fblas is None or flapack is None or not (hasattr(fblas, "dger") and hasattr(flapack, "dgesdd")):
        from scipy.linalg import blas, lapack
        return blas.dger, lapack.dgesdd
    return fblas.dger, flapack.dgesdd


dger, dgesdd = _load()
