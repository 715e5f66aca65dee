"""Checkpoint and resume: a run killed after a checkpoint and resumed ends exactly like the run
left alone; checkpoints from another configuration, data set or rank count are refused."""
import h5py
import numpy as np
import pytest

from conftest import omtl_forked as omtl, read_results
from omtl_mpi.algorithms import REGISTRY
from omtl_mpi.algorithms.admm import AdmmParams


def same(a, b):
    for key in a:
        if key != "attrs":
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def interrupted_then_resumed(tmp_path, args, ranks=None, fail_rank=0, mode="raise"):
    """Run ARGS alone, and again checkpointed every 20 rounds and failed at round 55, then
    resumed from the checkpoint of round 40 (the second one written): the two end with the
    same bits. Returns the results of the run left alone."""
    full, part = tmp_path / "full.h5", tmp_path / "part.h5"
    r = omtl("run", *args, "--out", full, np_ranks=ranks)
    assert r.returncode == 0, r.stderr
    r = omtl("run", *args, "--out", part, "--checkpoint-every", "20", "--fail-at", "55",
             "--fail-rank", fail_rank, "--fail-mode", mode, np_ranks=ranks, timeout=60)
    assert r.returncode != 0 and not part.exists()
    ckpt = tmp_path / "part.ckpt.h5"
    with h5py.File(ckpt) as f:
        assert f.attrs["round"] == 40
    r = omtl("run", *args, "--out", part, "--resume", ckpt, np_ranks=ranks)
    assert r.returncode == 0, r.stderr
    assert "resumed from" in r.stderr
    full = read_results(full)
    same(full, read_results(part))
    return full


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_resume_in_process_every_learner(tmp_path, small_tasks, name):
    interrupted_then_resumed(tmp_path, ["--algo", name, "--data", small_tasks])


@pytest.mark.parametrize("name", ["c-admm", "d-admm"])
def test_resume_with_adaptive_w_steps(tmp_path, small_tasks, name):
    """The w-step's own state survives the checkpoint file: AdaGrad's sums here; AROW's
    inverse is the default w-step's, resumed by test_resume_in_process_every_learner (and
    under MPI by test_resume_under_mpi)."""
    assert AdmmParams().w_step == "arow"
    interrupted_then_resumed(tmp_path, ["--algo", name, "--data", small_tasks, "--w-step", "adagrad"])


@pytest.mark.parametrize("algo, ranks, fail_rank, mode", [("c-admm", 4, 2, "kill"),
                                                           ("d-admm", 3, 1, "raise"),
                                                           ("drom", 3, 0, "raise")])
@pytest.mark.mpi
def test_resume_under_mpi(mpiexec, tmp_path, small_tasks, algo, ranks, fail_rank, mode):
    """With the defaults: the ADMM learners' AROW w-step (its inverse on every worker) too."""
    assert AdmmParams().w_step == "arow"
    interrupted_then_resumed(tmp_path, ["--algo", algo, "--data", small_tasks], ranks, fail_rank, mode)


@pytest.mark.mpi
def test_resume_under_mpi_with_scaling_and_class_weights(mpiexec, tmp_path, small_tasks):
    """--scale online (every task's largest |x| so far) and --class-weight balanced (every
    task's counts of each label) survive the checkpoint on 3 ranks: both in one job."""
    interrupted_then_resumed(tmp_path, ["--algo", "c-admm", "--data", small_tasks, "--seed", "2",
                                        "--scale", "online", "--class-weight", "balanced"],
                             3, 1, "raise")


@pytest.mark.parametrize("algo, settings", [
    ("c-admm", ["--preset", "paper", "--omega-every", "7"]),
    ("c-admm", ["--relationship", "--omega-every", "7"]),
    ("d-admm", ["--preset", "paper", "--omega-every", "7"]),
], ids=["c-admm-paper", "c-admm-relationship", "d-admm-paper"])
def test_resume_with_omega_learned(tmp_path, small_tasks, algo, settings):
    """Omega learned every 7th round, checkpointed at round 40 (40 = 7 * 5 + 5, between two
    updates): the resumed run must know how many consensus steps were taken, or it updates
    Omega at rounds 47, 54, ... instead of 42, 49, ... and ends elsewhere (the helper checks
    that the checkpoint is round 40's)."""
    full = interrupted_then_resumed(tmp_path, ["--algo", algo, "--data", small_tasks, *settings])
    assert full["attrs"]["relationship"]
    assert np.abs(full["model/omega"] - np.eye(5) / 5).max() > 1e-2     # Omega was learned


@pytest.mark.parametrize("algo, settings, fail_rank, mode", [
    ("c-admm", ["--preset", "paper", "--omega-every", "7"], 0, "kill"),
    ("d-admm", ["--relationship", "--omega-every", "7"], 2, "raise"),
], ids=["c-admm-paper-3-ranks", "d-admm-relationship-3-ranks"])
@pytest.mark.mpi
def test_resume_with_omega_learned_under_mpi(mpiexec, tmp_path, small_tasks, algo, settings,
                                             fail_rank, mode):
    """The same on 3 ranks: C-ADMM's server holds the round count; every D-ADMM node its own."""
    full = interrupted_then_resumed(tmp_path, ["--algo", algo, "--data", small_tasks, *settings],
                                    3, fail_rank, mode)
    assert np.abs(full["model/omega"] - np.eye(5) / 5).max() > 1e-2


@pytest.mark.mpi
def test_foreign_checkpoints_are_refused(mpiexec, tmp_path, small_tasks):
    ckpt = tmp_path / "c.ckpt.h5"
    r = omtl("run", "--data", small_tasks, "--checkpoint", ckpt, "--checkpoint-every", "40",
             "--fail-at", "100")
    assert r.returncode == 1 and ckpt.exists()
    cases = [(["--rho", "0.2"], None, "made with a different configuration (params.rho was 0.1, now 0.2)"),
             (["--synth-samples", "1000", "--data", "synthetic"], None, "made on a different data set"),
             ([], 3, "made with 1 ranks, this run has 3")]
    for extra, ranks, message in cases:
        args = ["run", "--data", small_tasks, *extra, "--resume", ckpt]
        r = omtl(*args, np_ranks=ranks, timeout=60)
        assert r.returncode == 2 and message in r.stderr, r.stderr
    (tmp_path / "junk.h5").write_bytes(b"junk")
    r = omtl("run", "--data", small_tasks, "--resume", tmp_path / "junk.h5")
    assert r.returncode == 2 and "not a readable HDF5 checkpoint" in r.stderr


def test_checkpoint_needs_a_place(tmp_path):
    r = omtl("run", "--synth-samples", "50", "--checkpoint-every", "10")
    assert r.returncode == 2 and "--checkpoint-every needs --checkpoint PATH or --out" in r.stderr
