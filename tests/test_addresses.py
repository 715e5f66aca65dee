"""--aslr: when ranks re-start without address-space layout randomisation, and that they did."""
import json
import os
import sys

import pytest

from conftest import omtl
from omtl_mpi.fast import addresses
from omtl_mpi.fast.addresses import local_ranks_from_launcher, shares_cores

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="personality(2) is Linux's")


def test_ranks_share_cores_when_more_than_the_cpus_they_may_use():
    assert shares_cores(6, 2, 2)
    assert not shares_cores(2, 2, 2)
    assert not shares_cores(1, 1, 8)
    # a launcher that bound each rank to its own CPU (mask smaller than the machine)
    assert not shares_cores(6, 1, 16)
    # ... or stacked more ranks than the machine has CPUs
    assert shares_cores(6, 1, 2)


def test_local_rank_count_comes_from_the_launchers_variables():
    assert local_ranks_from_launcher({"MPI_LOCALNRANKS": "6"}) == 6                 # MPICH
    assert local_ranks_from_launcher({"OMPI_COMM_WORLD_LOCAL_SIZE": "3"}) == 3      # Open MPI
    assert local_ranks_from_launcher({"PMI_RANK": "0"}) is None
    assert local_ranks_from_launcher({"MPI_LOCALNRANKS": "lots"}) is None


class RefusingLibc:
    """A C library whose personality(2) refuses changes, as a container's seccomp profile may."""

    def personality(self, persona):
        return 0 if persona == 0xFFFFFFFF else -1


def test_a_refused_personality_changes_nothing():
    assert addresses.turn_off(RefusingLibc()) is False


def _expected(ranks):
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return "off" if shares_cores(ranks, allowed, os.cpu_count()) else "on"


@linux_only
@pytest.mark.parametrize("launch", ["mpiexec", "mpiexec --aslr auto", "--np"])
def test_ranks_sharing_cores_run_without_randomisation(mpiexec, launch):
    args = ["run", "--synth-samples", "300", "--no-progress", "--json"]
    if launch == "mpiexec":
        r = omtl(*args, np_ranks=6)              # each rank re-starts itself before MPI_Init
    elif launch == "mpiexec --aslr auto":        # ... after click has parsed the command line
        r = omtl(*args, "--aslr", "auto", np_ranks=6)
    else:
        r = omtl(*args, "--np", "6")             # mpiexec is started with the personality
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["aslr"] == _expected(6)


@linux_only
def test_aslr_on_keeps_randomisation_and_the_same_results(mpiexec, tmp_path):
    args = ["run", "--synth-samples", "300", "--no-progress", "--json"]
    r = omtl(*args, "--aslr", "on", "--out", tmp_path / "on.h5", np_ranks=6)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["aslr"] == "on"
    r = omtl(*args, "--out", tmp_path / "auto.h5", np_ranks=6)
    assert r.returncode == 0, r.stderr
    from conftest import read_results
    import numpy as np
    a, b = read_results(tmp_path / "on.h5"), read_results(tmp_path / "auto.h5")
    for key in a:
        if key != "attrs":
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@linux_only
def test_one_process_keeps_randomisation():
    r = omtl("run", "--synth-samples", "100", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["aslr"] == "on"


@pytest.mark.parametrize("argv, early", [
    (["run", "--data", "x.h5", "--json"], True),
    (["run"], True),
    (["run", "--aslr", "on"], False),         # the user's choice: left to click to parse
    (["run", "--aslr=auto"], False),
    (["run", "--np", "6"], False),            # the launcher, not a rank
    (["run", "--help"], False),
    (["data", "synth", "-o", "x.h5"], False),
    ([], False),
])
def test_python_m_re_executes_before_importing_the_command_line_only_for_plain_runs(
        monkeypatch, argv, early):
    calls = []
    monkeypatch.setattr(addresses, "reexec_if_sharing", calls.append)
    addresses.reexec_early(argv)
    assert calls == (["auto"] if early else [])


def test_bad_aslr_value_is_one_clear_line():
    r = omtl("run", "--aslr", "off")
    assert r.returncode == 2
    assert "--aslr" in r.stderr and "'auto'" in r.stderr and "Traceback" not in r.stderr


def test_the_re_execution_happens_before_numpy_is_imported():
    """The interpreter that re-executes itself has loaded next to nothing (no numpy, no
    learners): what __main__ imports to decide is that light."""
    import subprocess
    code = ("import sys; import omtl_mpi.runtime.launch; "
            "print(sorted(m for m in ('numpy', 'omtl_mpi.config', 'click') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
