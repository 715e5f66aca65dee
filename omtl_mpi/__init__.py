"""omtl-mpi: online multi-task relationship learning (C-ADMM, D-ADMM and baselines) on MPI.

The Python API (what ``omtl_mpi.NAME`` gives; see :data:`__all__`)::

    learner(name, n_tasks, n_features, **params)   a learner object (omtl_mpi.learners)
    CADMM, DADMM, ..., Learner                     their classes
    load(path)                                     a learner saved with Learner.save
    run_streams(X_list, y_list, algo=..., ...)     a whole run, as `omtl-mpi run` (omtl_mpi.streams)
    load_result(path)                              a results file, as run_streams returns it
    hash_texts(texts, n_features)                  text as the text importers hash it (omtl_mpi.text)
    check_learner(learner_or_name)                 the generic learner checks (omtl_mpi.checks)
    UserError                                      every bad input (a ValueError)

and, with scikit-learn installed, ``from omtl_mpi.sklearn import MultiTaskClassifier``: any
learner as a scikit-learn classifier.

Importing the package loads none of it (the names are resolved on first use), starts no MPI
and changes no environment variable.

The package is layered: each layer imports only from the ones below it (docs/DESIGN.md,
*Layers*; tests/test_layers.py).
"""
import importlib as _importlib

__version__ = "0.1.0"

# public name -> the module that defines it (imported when the name is first used)
_PUBLIC = {
    "learner": "learners", "load": "learners", "Learner": "learners", "parameters": "learners",
    "CADMM": "learners", "DADMM": "learners", "DPSGD": "learners", "ADMMSingle": "learners",
    "PMSCLog": "learners", "DROM": "learners", "PA": "learners", "AdaGrad": "learners",
    "AROW": "learners", "MTPerceptron": "learners", "Pooled": "learners", "Hashed": "learners",
    "run_streams": "streams", "load_result": "streams", "Result": "streams",
    "check_learner": "checks",
    "hash_texts": "text",
    "UserError": "errors",
}
__all__ = sorted(_PUBLIC) + ["__version__"]


def __getattr__(name):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'omtl_mpi' has no attribute {name!r}")
    value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_PUBLIC))
