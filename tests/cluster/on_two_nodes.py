"""Slurm with two nodes: a controller on host h0 and a slurmd on each of h1 and h2, the hosts of
tests/cluster/hosts.sh (`tests/cluster/slurm.sh start DIR 3`, run by tests/cluster/run.sh, which
sets OMTL_SLURM_HOSTS_CONF to its slurm.conf). Each node declares 4 CPUs, so a job of 5 ranks
needs both; the ranks talk TCP over the hosts' links (UCX_TLS=tcp).

Run by ``make test-cluster`` (root); every command has a limit.
"""
import json
import os
import shlex
import subprocess
import sys

import h5py
import pytest

from conftest import differing
from on_hosts import BIN, HOSTS, LIMIT, ROOT, SWEEP, here, link_bytes

pytestmark = [pytest.mark.cluster, pytest.mark.mpi]

CONF = os.environ.get("OMTL_SLURM_HOSTS_CONF", "")


@pytest.fixture(scope="module", autouse=True)
def two_nodes():
    if not CONF or os.geteuid() != 0:
        pytest.fail("no two-node Slurm: run these tests through 'make test-cluster' (as root)")
    r = on_h0("sinfo", "-h", "-N", "-o", "%N %T")
    assert r.returncode == 0 and r.stdout.split() == ["h1", "idle", "h2", "idle"], r.stdout + r.stderr


def on_h0(*cmd, env=None, timeout=LIMIT, cwd=ROOT):
    """CMD run on host h0 (where the clients reach the controller), with the cluster's
    SLURM_CONF, this environment's programs first on PATH and MPI forced onto TCP (quoted:
    hosts.sh, like ssh, runs its words as one shell line)."""
    extra = [f"{k}={v}" for k, v in (env or {}).items()]
    words = ["env", f"SLURM_CONF={CONF}", "UCX_TLS=tcp", f"PATH={BIN}:{os.environ['PATH']}",
             "PYTHONUNBUFFERED=1", *extra, *map(str, cmd)]
    return subprocess.run([HOSTS, "exec", "h0", *map(shlex.quote, words)], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def srun(*args, nodes=2, n=5, mpi="pmi2", cwd=ROOT):
    """``srun --mpi=MPI -N NODES -n N python -m mpi4py -m omtl_mpi ARGS`` from h0."""
    return on_h0("timeout", LIMIT - 10, "srun", f"--mpi={mpi}", "-N", nodes, "-n", n, sys.executable, "-m", "mpi4py", "-m", "omtl_mpi",
                 *args, cwd=cwd)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("nodes") / "tasks.h5"
    r = here(None, "data", "synth", "-o", path, "--tasks", "4", "--samples", "300", "--seed", "5")
    assert r.returncode == 0, r.stderr
    return path


@pytest.mark.parametrize("algo, n, options", [
    ("c-admm", 5, []), ("d-admm", 4, ["--topology", "ring"]),
])
def test_srun_over_two_nodes_gives_the_bits_of_one_machine(data, tmp_path, algo, n, options):
    before = link_bytes("h2")
    args = ["run", "--data", data, "--algo", algo, *options, "--json"]
    r = srun(*args, "--out", tmp_path / "nodes.h5", n=n)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert sorted(set(report["hosts"])) == ["h1", "h2"], report["hosts"]
    assert sum(report["ranks_per_host"].values()) == n
    assert report["shared_memory_across_hosts"] == []
    assert link_bytes("h2") - before > 10_000          # the ranks' bytes crossed h2's link
    r = here(n, *args, "--out", tmp_path / "here.h5")
    assert r.returncode == 0, r.stderr
    assert differing(tmp_path / "nodes.h5", tmp_path / "here.h5") == []


def test_lone_copies_on_two_nodes_stop_with_one_line_each_before_any_file(data, tmp_path):
    # the cluster's MpiDefault=none: srun without --mpi starts copies that MPI does not join
    r = srun("run", "--data", data, "--out", "run.h5", mpi="none", n=3, cwd=tmp_path)
    assert r.returncode != 0, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 3 and len(set(errors)) == 1, r.stderr
    assert "srun started 3 copies" in errors[0] and "srun --mpi=pmi2" in errors[0]
    assert os.listdir(tmp_path) == []


def test_a_job_given_two_nodes_whose_ranks_run_on_one_says_so(data, tmp_path):
    # salloc runs its command on h0, not on the nodes; mpiexec's fork launcher keeps every rank
    # there: the allocation's two nodes stand idle, and the run says so once
    r = on_h0("timeout", LIMIT - 10, "salloc", "-N", "2", "-n", "2", os.path.join(BIN, "mpiexec"),
              "-launcher", "fork", "-n", "3", sys.executable, "-m", "mpi4py", "-m", "omtl_mpi",
              "run", "--data", data, "--out", tmp_path / "run.h5", "--json")
    assert r.returncode == 0, r.stderr
    notices = [line for line in r.stderr.splitlines() if "was given 2 nodes" in line]
    assert len(notices) == 1 and "all 3 ranks run on h0" in notices[0], r.stderr


def test_a_sweep_through_slurm_puts_each_run_on_two_nodes(tmp_path):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(SWEEP + '[slurm]\noptions = ["--nodes=2"]\n')
    folder = tmp_path / "out"
    r = on_h0("timeout", LIMIT - 10, sys.executable, "-m", "omtl_mpi", "sweep", sweep, "--out",
              folder, "--launcher", "slurm", "--wait", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["states"] == {"done": 2}
    for run in ("small.c.s0", "small.d.s0"):
        with h5py.File(folder / "runs" / f"{run}.h5") as f:
            assert sorted({h.decode() for h in f["timing/hosts"][()]}) == ["h1", "h2"]
