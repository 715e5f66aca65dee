"""What a rank imports before its first round: every rank pays it, on cores the ranks share."""
import subprocess
import sys

import scipy.linalg.blas
import scipy.linalg.lapack

from omtl_mpi.algorithms import fortran

TIMEOUT = 60


def _imported_after(code):
    """Modules whose names start with 'scipy' in a fresh interpreter after running ``code``."""
    probe = code + "\nimport sys\nprint(' '.join(sorted(m for m in sys.modules if m.startswith('scipy'))))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=TIMEOUT, check=True)
    return set(out.stdout.split())


def test_the_run_path_loads_scipys_fortran_wrappers_alone():
    # scipy.linalg's package import (its array-API layer, docstring processing) was most of a
    # rank's import time; only the extension module holding the wrapper is needed
    loaded = _imported_after("import omtl_mpi.cli, omtl_mpi.runtime.run, omtl_mpi.algorithms\n"
                             "from omtl_mpi.algorithms import fortran\n"
                             "assert callable(fortran.dger)")
    assert loaded == set()          # nothing of scipy in sys.modules, and nothing imported


def test_scipy_imported_afterwards_is_whole_and_has_the_same_functions():
    loaded = _imported_after(
        "from omtl_mpi.algorithms import fortran\nimport sys, scipy.linalg\n"
        "assert fortran.dger is scipy.linalg.blas.dger\n"
        "assert scipy.linalg._fblas is sys.modules['scipy.linalg._fblas']")
    assert "scipy.linalg" in loaded


def test_the_logistic_loss_imports_scipy_special_on_first_use():
    loaded = _imported_after(
        "import numpy as np\nfrom omtl_mpi.algorithms.losses import descent_coef\n"
        "assert descent_coef('hinge', np.ones(2), np.zeros(2), np.ones(2, bool)).tolist() == [1, 1]")
    assert "scipy.special" not in loaded
    loaded = _imported_after(
        "import numpy as np\nfrom omtl_mpi.algorithms.losses import descent_coef\n"
        "assert descent_coef('logistic', np.ones(2), np.zeros(2), np.ones(2, bool)).tolist() == [.5, .5]")
    assert "scipy.special" in loaded


def test_the_wrappers_are_scipys_own_functions():
    # the same function objects as scipy.linalg's, so the same bits
    assert fortran.dger is scipy.linalg.blas.dger
    assert fortran.dgesdd is scipy.linalg.lapack.dgesdd


def test_a_scipy_without_the_module_falls_back_to_the_normal_import(monkeypatch):
    monkeypatch.setattr(fortran, "extension", lambda name: None)
    assert fortran._load() == (scipy.linalg.blas.dger, scipy.linalg.lapack.dgesdd)


def test_a_module_that_cannot_be_loaded_alone_is_reported_as_missing(monkeypatch):
    assert fortran.extension("_no_such_module") is None
    monkeypatch.setattr(fortran.importlib.util, "find_spec", lambda name: None)   # no scipy
    assert fortran.extension("_also_missing") is None
