"""Safe by default: Open MPI's refusal to run as root is overridden only with a
notice on stderr, once per command, and not at all when the user set its variables."""
import json
import os
import sys

import pytest

from conftest import TIMEOUT, _env
from omtl_mpi.runtime import launch
from omtl_mpi.runtime.launchers import local
from omtl_mpi.runtime.launchers.local import ROOT_NOTICE, ROOT_VARS, root_override

NOTICE = f"notice: {ROOT_NOTICE}"
as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                             reason="the whole command as root: this process must be root")


def test_root_override_only_for_root_and_only_what_the_user_left_unset():
    assert root_override({}, euid=0, open_mpi=True) == {name: "1" for name in ROOT_VARS}
    assert root_override({}, euid=1000, open_mpi=True) == {}
    assert root_override({name: "0" for name in ROOT_VARS}, euid=0, open_mpi=True) == {}   # theirs
    assert root_override({ROOT_VARS[0]: "1"}, euid=0, open_mpi=True) == {ROOT_VARS[1]: "1"}
    assert root_override({}, euid=0, open_mpi=False) == {}        # MPICH: nothing to override
    assert all(name in ROOT_NOTICE for name in ROOT_VARS)
    assert "normal user" in ROOT_NOTICE and "\n" not in ROOT_NOTICE


def _probe(n_ranks, args):
    """In place of mpiexec: exit 0 if the job was allowed to run as root, else 3."""
    code = ("import os, sys; sys.exit(0 if all(os.environ.get(v) == '1' for v in %r) else 3)"
            % (ROOT_VARS,))
    return [sys.executable, "-c", code]


@pytest.mark.parametrize("user_set", [False, True])
def test_launch_says_when_it_lets_open_mpi_run_as_root(monkeypatch, user_set):
    monkeypatch.setattr(local, "mpi_command", _probe)
    monkeypatch.setattr(local, "uses_open_mpi", lambda: True)
    monkeypatch.setattr(launch.os, "geteuid", lambda: 0)
    for name in ROOT_VARS:
        if user_set:
            monkeypatch.setenv(name, "1")
        else:
            monkeypatch.delenv(name, raising=False)
    said = []
    assert launch.launch(local.LAUNCHER, 2, [], echo=said.append) == 0        # the job got the permission
    assert said == ([] if user_set else [NOTICE])


def test_launch_as_another_user_neither_overrides_nor_says_so(monkeypatch):
    monkeypatch.setattr(local, "mpi_command", _probe)
    monkeypatch.setattr(local, "uses_open_mpi", lambda: True)
    monkeypatch.setattr(launch.os, "geteuid", lambda: 1000)
    for name in ROOT_VARS:
        monkeypatch.delenv(name, raising=False)
    said = []
    assert launch.launch(local.LAUNCHER, 2, [], echo=said.append) == 3
    assert said == []


def _root_env(user_set: bool) -> dict:
    env = _env()
    for name in ROOT_VARS:
        env.pop(name, None)
        if user_set:
            env[name] = "1"
    return env


@pytest.mark.mpi
@as_root
@pytest.mark.parametrize("user_set", [False, True])
def test_np_as_root_prints_the_notice_on_stderr_only(mpiexec, user_set):
    """With Open MPI's launcher; with MPICH's (this project's wheel) nothing is overridden."""
    import subprocess
    r = subprocess.run([sys.executable, "-m", "omtl_mpi", "run", "--np", "2", "--synth-tasks", "2",
                        "--synth-samples", "50", "--json"], capture_output=True, text=True,
                       timeout=TIMEOUT, env=_root_env(user_set))
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout)                        # --json's stdout is the report alone
    notices = 0 if user_set or not local.uses_open_mpi() else 1
    assert r.stderr.count(NOTICE) == notices, r.stderr


SWEEP = """\
name = "root"
seeds = [0, 1]
[data.s]
synthetic = { tasks = 2, samples = 50 }
[algorithms.c-admm]
ranks = 2
[algorithms.arow]
ranks = 1
"""


@pytest.mark.mpi
@pytest.mark.parametrize("user_set", [False, True])
def test_a_sweep_says_it_once_not_once_per_run(mpiexec, tmp_path, monkeypatch, user_set):
    # in this process, as root whoever runs the tests: two runs under mpiexec, two in one process
    from omtl_mpi.sweep import load_plan, run_sweep
    monkeypatch.setattr(launch.os, "geteuid", lambda: 0)
    monkeypatch.setattr(local, "uses_open_mpi", lambda: True)       # MPICH ignores the variables
    for name in ROOT_VARS:
        if user_set:
            monkeypatch.setenv(name, "1")
        else:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MPIEXEC_TIMEOUT", str(TIMEOUT))
    path = tmp_path / "root.toml"
    path.write_text(SWEEP)
    plan = load_plan(str(path))
    assert sorted(r.ranks for r in plan.runs) == [1, 1, 2, 2]
    said = []
    assert run_sweep(plan, str(tmp_path / "out"), echo=said.append) == {"done": 4}
    assert said.count(NOTICE) == (0 if user_set else 1), said
