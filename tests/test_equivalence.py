"""Spec equivalences 1 and 4: in-process == mpiexec (2, 3, K+1 ranks) to 1e-10, with Omega fixed at
I/K (the defaults) and learned (--relationship, --preset paper); same seed, same bits."""
import numpy as np
import pytest

from conftest import assert_in_process_equals_mpiexec, omtl_forked as omtl, per_task, read_results


def assert_same_run(a, b, atol=1e-10):
    assert a.keys() == b.keys()
    for key in a:
        if key == "attrs":
            continue
        if key in ("predictions", "tasks/offsets", "metrics/mistakes", "metrics/confusion"):
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        else:
            np.testing.assert_allclose(a[key], b[key], rtol=0, atol=atol, err_msg=key)


@pytest.fixture(scope="module")
def in_process(small_tasks, tmp_path_factory):
    out = {}
    folder = tmp_path_factory.mktemp("inproc")
    for variant in ("exact", "paper"):
        path = folder / f"{variant}.h5"
        r = omtl("run", "--data", small_tasks, "--variant", variant, "--out", path)
        assert r.returncode == 0, r.stderr
        out[variant] = read_results(path)
    return out


@pytest.mark.mpi
@pytest.mark.parametrize("ranks", [2, 3, 6])
@pytest.mark.parametrize("variant", ["exact", "paper"])
def test_mpi_equals_in_process(mpiexec, small_tasks, tmp_path, in_process, ranks, variant):
    path = tmp_path / "mpi.h5"
    r = omtl("run", "--data", small_tasks, "--variant", variant, "--out", path, np_ranks=ranks)
    assert r.returncode == 0, r.stderr
    mpi = read_results(path)
    assert mpi["attrs"]["ranks"] == ranks
    assert_same_run(in_process[variant], mpi)


def assert_omega_learned(results, K=5):
    """Omega moved away from its start I/K (else an Omega test could pass without learning it);
    D-ADMM: every node's own Omega too."""
    start = np.eye(K) / K
    assert np.abs(results["model/omega"] - start).max() > 1e-2, results["model/omega"]
    for omega in results.get("model/node_omega", ()):
        assert np.abs(omega - start).max() > 1e-2, omega


@pytest.mark.mpi
def test_minibatch_and_other_losses_match_under_mpi(mpiexec, small_tasks, tmp_path):
    # --relationship: without it Omega stays I/K and --omega-every does nothing
    args = ["--data", small_tasks, "--batch", "4", "--loss", "logistic", "--relationship",
            "--omega-every", "3", "--seed", "5"]
    r = omtl("run", *args, "--out", tmp_path / "a.h5")
    assert r.returncode == 0, r.stderr
    r = omtl("run", *args, "--out", tmp_path / "b.h5", np_ranks=4)
    assert r.returncode == 0, r.stderr
    a = read_results(tmp_path / "a.h5")
    assert_omega_learned(a)
    assert_same_run(a, read_results(tmp_path / "b.h5"))


@pytest.mark.parametrize("settings", [["--relationship", "--omega-every", "3"], ["--preset", "paper"]],
                         ids=["relationship-every-3", "preset-paper"])
@pytest.mark.mpi
@pytest.mark.parametrize("algo, local", [("c-admm", []), ("d-admm", ["--nodes", "3"])])
def test_mpi_equals_in_process_with_omega_learned(mpiexec, tmp_path, algo, local, settings):
    """Omega learned (every 3rd round with the defaults' vote and AROW w-step; every round with
    the paper's settings): one process and 3 ranks (C-ADMM: server + 2 workers; D-ADMM: 3 nodes
    on a ring) agree, predictions and mistakes exactly, W, u, V, Z and every Omega to 1e-10."""
    args = ["--algo", algo, "--synth-samples", "300", *settings]
    r = omtl("run", *args, *local, "--out", tmp_path / "a.h5")
    assert r.returncode == 0, r.stderr
    r = omtl("run", *args, "--out", tmp_path / "b.h5", np_ranks=3)
    assert r.returncode == 0, r.stderr
    a, b = read_results(tmp_path / "a.h5"), read_results(tmp_path / "b.h5")
    assert a["attrs"]["relationship"] and b["attrs"]["ranks"] == 3
    assert_omega_learned(a)
    if algo == "d-admm":
        assert a["model/node_omega"].shape == (3, 5, 5)
        assert a["model/node_omega_basis"].shape == (3, 5, 5)
    assert_same_run(a, b)


@pytest.mark.mpi
@pytest.mark.parametrize("algo, local", [("c-admm", []), ("d-admm", ["--nodes", "3"])])
def test_mpi_equals_in_process_with_scaling_and_class_weights(mpiexec, small_tasks, tmp_path, algo, local):
    """What a learner sees of an instance (--scale online, with the default intercept) and
    --class-weight balanced, both per task and counted as the rounds go: the same on 3 ranks
    as in one process."""
    assert_in_process_equals_mpiexec(["--algo", algo, "--data", small_tasks, "--seed", "1",
                                      "--scale", "online", "--class-weight", "balanced"],
                                     local, 3, tmp_path)


def test_same_seed_same_bits(small_tasks, tmp_path):
    for name in ("a", "b"):
        r = omtl("run", "--data", small_tasks, "--loss", "perceptron", "--out", tmp_path / f"{name}.h5")
        assert r.returncode == 0, r.stderr
    a, b = read_results(tmp_path / "a.h5"), read_results(tmp_path / "b.h5")
    for key in a:
        if key != "attrs":
            assert a[key].tobytes() == b[key].tobytes(), key


def test_seed_shuffles_each_stream_reproducibly(small_tasks, tmp_path):
    runs = {}
    for name, seed in (("file", []), ("s1", ["--seed", "1"]), ("s1b", ["--seed", "1"]), ("s2", ["--seed", "2"])):
        r = omtl("run", "--data", small_tasks, *seed, "--out", tmp_path / f"{name}.h5")
        assert r.returncode == 0, r.stderr
        runs[name] = read_results(tmp_path / f"{name}.h5")
    assert runs["s1"]["predictions"].tobytes() == runs["s1b"]["predictions"].tobytes()
    assert runs["s1"]["metrics/mean_curve"].tobytes() == runs["s1b"]["metrics/mean_curve"].tobytes()
    for other in ("file", "s2"):
        assert not np.array_equal(runs["s1"]["metrics/mean_curve"], runs[other]["metrics/mean_curve"])
    # a reordering, not a resampling: every task still presents all of its instances
    assert [len(p) for p in per_task(runs["s1"])] == [len(p) for p in per_task(runs["file"])]
