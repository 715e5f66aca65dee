"""--aslr: ranks keep address-space layout randomisation unless told --aslr off; with off, when
they re-start without it, and that they did."""
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


# 6 ranks share this 2-core machine's cores; each reads its own personality (the report's
# "aslr" is every rank's, "mixed" if they differ). A short run: what is tested is how the
# ranks start, not what they learn.
ARGS = ["run", "--synth-samples", "100", "--no-progress", "--json"]


@pytest.mark.mpi
@linux_only
def test_ranks_keep_randomisation_by_default_even_sharing_cores(mpiexec):
    """Through --np; under mpiexec, test_aslr_off_gives_the_same_results's first run."""
    r = omtl(*ARGS, "--np", "6")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["aslr"] == "on"


@pytest.mark.mpi
@linux_only
@pytest.mark.parametrize("launch", ["mpiexec --aslr=off", "--np"])
def test_aslr_off_runs_ranks_sharing_cores_without_randomisation(mpiexec, launch):
    """--aslr=off under mpiexec (each rank re-starts itself after click has parsed the command
    line) and through --np (mpiexec starts with the personality); `--aslr off` under mpiexec
    (each rank re-starts itself before click) is test_aslr_off_gives_the_same_results's
    second run."""
    if launch == "mpiexec --aslr=off":
        r = omtl(*ARGS, "--aslr=off", np_ranks=6)
    else:
        r = omtl(*ARGS, "--aslr", "off", "--np", "6")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["aslr"] == _expected(6)


@pytest.mark.mpi
@linux_only
def test_aslr_off_gives_the_same_results(mpiexec, tmp_path):
    """6 ranks under mpiexec: by default every rank keeps its randomisation; told `--aslr
    off`, each re-starts itself without it (before click), and learns the same bits."""
    args = ARGS
    r = omtl(*args, "--out", tmp_path / "on.h5", np_ranks=6)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["aslr"] == "on"
    r = omtl(*args, "--aslr", "off", "--out", tmp_path / "off.h5", np_ranks=6)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["aslr"] == _expected(6)
    from conftest import read_results
    import numpy as np
    a, b = read_results(tmp_path / "on.h5"), read_results(tmp_path / "off.h5")
    for key in a:
        if key != "attrs":
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@linux_only
def test_one_process_keeps_randomisation():
    r = omtl("run", "--synth-samples", "100", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["aslr"] == "on"


@pytest.mark.parametrize("argv, early", [
    (["run", "--data", "x.h5", "--json"], False),   # the default, on: nothing to re-execute
    (["run"], False),
    (["run", "--aslr", "on"], False),
    (["run", "--aslr", "off"], True),
    (["run", "--data", "x.h5", "--aslr", "off", "--json"], True),
    (["run", "--aslr", "on", "--aslr", "off"], True),     # the last one counts, as in click
    (["run", "--aslr", "off", "--aslr=on"], False),
    (["run", "--aslr=off"], False),           # left to the call after click has parsed it
    (["run", "--aslr"], False),               # click's error to give
    (["run", "--np", "6", "--aslr", "off"], False),   # the launcher, not a rank
    (["run", "--aslr", "off", "--help"], False),
    (["data", "synth", "--aslr", "off"], False),
    ([], False),
])
def test_python_m_re_executes_before_importing_the_command_line_only_when_told_off(
        monkeypatch, argv, early):
    calls = []
    monkeypatch.setattr(addresses, "reexec_if_sharing", calls.append)
    addresses.reexec_early(argv)
    assert calls == (["off"] if early else [])


def test_only_off_turns_randomisation_off(monkeypatch):
    # with ranks that share cores and a process that could change its personality, "on" (the
    # default) neither re-executes nor gives mpiexec the personality
    monkeypatch.setattr(addresses, "randomised", lambda: True)
    monkeypatch.setattr(addresses, "_cpus", lambda: (2, 2))
    monkeypatch.setattr(addresses, "local_ranks_from_launcher", lambda: 6)
    executed = []
    monkeypatch.setattr(addresses, "turn_off", lambda libc=None: executed.append("turn_off") or True)
    monkeypatch.setattr(addresses, "_libc", lambda: RefusingLibc())
    monkeypatch.setattr(addresses.os, "execv", lambda *a: executed.append("execv"))
    monkeypatch.delitem(sys.modules, "mpi4py.MPI", raising=False)    # as before MPI starts
    assert addresses.for_launch("on", 6) is None
    addresses.reexec_if_sharing("on")
    assert executed == []
    assert addresses.for_launch("off", 6) is addresses.turn_off
    assert addresses.for_launch("off", 2) is None          # no sharing: nothing to gain
    addresses.reexec_if_sharing("off")
    assert executed == ["turn_off", "execv"]


@pytest.mark.parametrize("value", ["auto", "pigeon"])
def test_bad_aslr_value_is_one_clear_line_naming_off(value):
    # "auto", the old default, is refused rather than silently meaning off
    r = omtl("run", "--aslr", value)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--aslr" in lines[0] and f"'{value}'" in lines[0], r.stderr
    assert "'off'" in lines[0] and "Traceback" not in r.stderr


def test_a_sweep_file_saying_aslr_auto_is_one_clear_line_naming_off():
    from omtl_mpi.errors import ConfigError
    from omtl_mpi.options import run_config
    with pytest.raises(ConfigError, match="--aslr must be one of on, off, got 'auto'"):
        run_config({"aslr": "auto"})
    assert run_config({"aslr": "off"}) == run_config({})     # how a run executes, not what


def test_the_re_execution_happens_before_numpy_is_imported():
    """The interpreter that re-executes itself has loaded next to nothing (no numpy, no
    learners): what __main__ imports to decide is that light."""
    import subprocess
    code = ("import sys; import omtl_mpi.runtime.launch; "
            "print(sorted(m for m in ('numpy', 'omtl_mpi.config', 'click') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
