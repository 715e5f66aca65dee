"""Ranks that share cores may run with one address layout (``omtl-mpi run --aslr on|off``).

``--aslr on``, the default, keeps the system's randomisation (a defence for ranks that parse
user-supplied files in C). With ``--aslr off`` a rank of a node with more ranks than CPUs
re-executes itself, before MPI is initialised, with the ``ADDR_NO_RANDOMIZE`` personality, so
that ranks sharing a core share its branch predictors; ``--np`` sets it on the mpiexec it starts
instead. Why, and where randomisation stays on regardless: docs/DESIGN.md, *The speed plug-in*;
what it buys: docs/PERFORMANCE.md, *Address layout*.
"""
from __future__ import annotations

import os
import sys

ADDR_NO_RANDOMIZE = 0x0040000       # linux/personality.h
_QUERY = 0xFFFFFFFF

# ranks of this job on this node, as launchers announce it (MPICH/Hydra, Open MPI, MVAPICH)
_LOCAL_SIZE_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE")


def _libc():
    import ctypes
    return ctypes.CDLL(None, use_errno=True)


def randomised() -> bool | None:
    """Whether this process runs with ASLR: None where that cannot be told (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        persona = _libc().personality(_QUERY)
    except (OSError, AttributeError):
        return None
    return None if persona == -1 else not persona & ADDR_NO_RANDOMIZE


def shares_cores(local_ranks: int, allowed_cpus: int, machine_cpus: int) -> bool:
    """Whether ``local_ranks`` ranks on a node must share cores.

    ``allowed_cpus`` is this rank's affinity mask, ``machine_cpus`` the node's CPU count. A mask
    smaller than the machine means the launcher placed the ranks itself; they then share cores
    only if there are more of them than the machine has CPUs.
    """
    return local_ranks >= 2 and local_ranks > max(allowed_cpus, machine_cpus)


def local_ranks_from_launcher(environ=os.environ) -> int | None:
    """Ranks of this job on this node, from the launcher's environment; None if not said."""
    values = [environ.get(name, "") for name in _LOCAL_SIZE_VARS]
    return next((int(value) for value in values if value.isdigit()), None)


def _cpus() -> tuple[int, int]:
    """CPUs this process may use, and the machine's."""
    machine = os.cpu_count() or 1
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else machine
    return allowed, machine


def turn_off(libc=None) -> bool:
    """Set ``ADDR_NO_RANDOMIZE`` for the programs this process executes from now on; False
    (and nothing changed) where that is not possible."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = libc or _libc()
        persona = libc.personality(_QUERY)
        if persona == -1:
            return False
        return bool(persona & ADDR_NO_RANDOMIZE) or libc.personality(persona | ADDR_NO_RANDOMIZE) != -1
    except (OSError, AttributeError):
        return False


def reexec_if_sharing(mode: str) -> None:
    """With ``mode == "off"``, re-execute this rank without ASLR when the launcher says that
    more ranks than CPUs share this node.  Returns when nothing is to be done (``mode == "on"``,
    the default) or it cannot be done; never returns otherwise.  Call before MPI is initialised.
    """
    if mode != "off" or "mpi4py.MPI" in sys.modules or randomised() is not True:
        return
    local = local_ranks_from_launcher()
    if local is None or not shares_cores(local, *_cpus()):
        return
    libc = _libc()
    before = libc.personality(_QUERY)
    if not turn_off(libc):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, sys.orig_argv)
    except OSError:                 # keep running as we are, and as we were
        libc.personality(before)


def reexec_early(argv) -> None:
    """:func:`reexec_if_sharing` for ``run --aslr off``, called by ``python -m omtl_mpi`` before
    anything else is imported, so that the interpreter replaced has loaded almost nothing.

    Only ``--aslr off`` as the last ``--aslr`` of a ``run`` line without ``--np`` or help counts:
    were ``off`` the value of another option, click would refuse the line before any file is
    read, so this guess never turns randomisation off for a run that click runs with it on.
    Everything else (``--aslr=off``; ``--np``, whose process is no rank) is left to ``run``.
    """
    if argv[:1] != ["run"] or any(a.startswith(("--np", "-h", "--help")) for a in argv[1:]):
        return
    named = [i for i, a in enumerate(argv) if a.startswith("--aslr")]
    if named and argv[named[-1]] == "--aslr" and argv[named[-1] + 1:named[-1] + 2] == ["off"]:
        reexec_if_sharing("off")


def for_launch(mode: str, n_ranks: int):
    """What ``--np`` runs in mpiexec's process before it starts (``preexec_fn``): with ``mode ==
    "off"`` and ranks that will share cores, what starts mpiexec and so its ranks (which inherit
    the personality) without ASLR; None otherwise. The launching process is not changed."""
    if mode == "off" and shares_cores(n_ranks, *_cpus()) and randomised() is True:
        return turn_off
    return None
