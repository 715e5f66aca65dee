"""The speed plug-in: everything that makes rounds faster without changing what they compute.

Three mechanisms, each an execution option of ``omtl-mpi run`` that the runtime picks and records
in the results; the algorithms and the plain transports (:mod:`omtl_mpi.comm`) know nothing of
them, and only :mod:`omtl_mpi.runtime` imports this package:

* ``--transport shm`` (:mod:`.shm`, :mod:`.doorbell`): one node's messages through MPI shared
  memory, waiting ranks asleep on a FIFO instead of polling, which is what makes more ranks
  than cores cheap on a laptop (docs/PERFORMANCE.md: wall and CPU time per round);
* ``--aslr auto`` (:mod:`.addresses`): ranks that share cores re-started without address-space
  layout randomisation, so that they share the core's branch predictors;
* ``--kernel numba`` (:mod:`.kernels`, :mod:`._compiled`, :mod:`.steps`): the ADMM learners'
  per-round steps compiled by numba, an optional dependency (``pip install 'omtl-mpi[fast]'``).
"""
from __future__ import annotations

# Nothing is imported here at module level: ranks re-execute themselves without address
# randomisation (.addresses) before they import numpy or the learners.


def compilable(params) -> bool:
    """Whether the learner with these hyper-parameters has compiled steps: the ADMM learners
    (C-ADMM, D-ADMM, ADMM-Single, PMSC-Log) with the Euclidean w-step and without the
    experts' vote or class weights (the paper's model, ``--preset paper``)."""
    from ..algorithms.admm import AdmmParams
    return (isinstance(params, AdmmParams) and params.w_step == "euclid" and not params.experts
            and params.class_weight == "none")


def check_kernel(kernel: str, params) -> None:
    """ConfigError (one line) unless ``--kernel kernel`` can run the learner of ``params``."""
    from ..config import KERNELS
    from ..errors import ConfigError
    from . import kernels
    if kernel not in KERNELS:
        raise ConfigError(f"--kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    if kernel != "numba":
        return
    if not compilable(params):
        raise ConfigError("--kernel numba compiles the ADMM learners with the euclid w-step, "
                          "--no-experts and no --class-weight only (as --preset paper runs them); "
                          "use --kernel numpy (or auto)")
    if not kernels.available():
        raise ConfigError("--kernel numba needs numba: pip install 'omtl-mpi[fast]' (or use "
                          "--kernel numpy)")


def choose_kernel(kernel: str, params, rounds: int, ranks_per_cpu: float) -> str | None:
    """What ``--kernel kernel`` means for a run of ``rounds`` rounds whose busiest node runs
    ``ranks_per_cpu`` ranks per CPU (each process pays the load).

    Returns
    -------
    str or None
        ``"numpy"`` or ``"numba"``; None for a learner that has no compiled steps (the report
        then names no kernel).

    Raises
    ------
    ConfigError
        As :func:`check_kernel`.
    """
    from ..config import AUTO_KERNEL_ROUNDS
    from . import kernels
    check_kernel(kernel, params)
    if not compilable(params):
        return None
    if kernel != "auto":
        return kernel
    long_enough = rounds >= AUTO_KERNEL_ROUNDS * max(1.0, ranks_per_cpu)
    return "numba" if long_enough and kernels.available() else "numpy"


def load_kernels() -> None:
    """Import (compiling if its sources changed) the compiled steps; ConfigError if they
    cannot load."""
    from ..errors import ConfigError
    from . import kernels
    try:
        kernels.load()
    except Exception as exc:        # numba missing or broken, or no writable cache folder
        raise ConfigError(f"--kernel numba: the compiled steps did not load ({type(exc).__name__}: "
                          f"{exc}); use --kernel numpy") from exc


def accelerate(role) -> None:
    """Give a freshly built role of an ADMM learner its compiled steps (:mod:`.steps`)."""
    from .steps import accelerate as swap
    swap(role)
