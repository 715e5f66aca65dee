"""Known-answer test beds (omtl-mpi data synth --family identical|clustered|unrelated): the
relationships they promise, reproducible draws, and clear errors."""
import json

import numpy as np
import pytest

from conftest import omtl_forked as omtl
from omtl_mpi.data.testbeds import generate_testbed, task_weights
from omtl_mpi.errors import ConfigError


def cosines(W):
    unit = W / np.linalg.norm(W, axis=1, keepdims=True)
    return unit @ unit.T


def test_the_families_have_the_relationships_they_promise():
    same = cosines(task_weights("identical", 10, 50))
    assert same[np.triu_indices(10, 1)].min() > 0.8
    clustered = cosines(task_weights("clustered", 10, 50))
    assert clustered[:5, :5].min() > 0.8 and clustered[5:, 5:].min() > 0.8   # two groups of 5
    assert clustered[:5, 5:].max() < -0.8                                     # around +w and -w
    apart = cosines(task_weights("unrelated", 10, 50))
    assert np.abs(apart[np.triu_indices(10, 1)]).max() < 0.6
    three = task_weights("clustered", 9, 50, clusters=3)
    assert cosines(three)[:3, :3].min() > 0.8 and cosines(three)[6:, 6:].min() > 0.8


def test_draws_are_reproducible_and_slices_are_bit_identical():
    names, X, y = generate_testbed("clustered", seed=4)
    assert len(X) == 10 and X[0].shape == (300, 50) and y[0].dtype == np.int8
    assert set(np.unique(np.concatenate(y))) == {-1, 1}
    again = generate_testbed("clustered", seed=4)
    part = generate_testbed("clustered", seed=4, only=[7, 2])
    assert part[0] == ["task7", "task2"]
    np.testing.assert_array_equal(part[1][0], X[7])
    np.testing.assert_array_equal(part[2][1], y[2])
    for a, b in zip(X, again[1]):
        np.testing.assert_array_equal(a, b)
    other = generate_testbed("clustered", seed=5)
    assert not np.array_equal(other[1][0], X[0])


def test_without_noise_the_labels_are_the_true_weights_signs():
    W = task_weights("unrelated", 3, 4, seed=1)
    _, X, y = generate_testbed("unrelated", tasks=3, samples=50, dims=4, noise=0.0, seed=1)
    for k in range(3):
        np.testing.assert_array_equal(y[k], np.where(X[k] @ W[k] >= 0, 1, -1))


@pytest.mark.parametrize("kw, message", [
    ({"tasks": 0}, "--tasks must be an integer >= 1"),
    ({"noise": -1.0}, "--noise must be a finite number >= 0"),
    ({"spread": float("nan")}, "--spread must be a finite number >= 0"),
    ({"clusters": 1}, "--clusters must be between 2 and the number of tasks"),
])
def test_bad_values_are_one_line_each(kw, message):
    with pytest.raises(ConfigError, match=message):
        generate_testbed("clustered", **kw)
    with pytest.raises(ConfigError, match="unknown family"):
        generate_testbed("twins")


def test_the_command_line_writes_a_task_file_learners_run_on(tmp_path):
    out = tmp_path / "c.h5"
    r = omtl("data", "synth", "-o", out, "--family", "clustered", "--tasks", "4", "--samples", "80",
             "--dims", "6", "--noise", "0.2")
    assert r.returncode == 0, r.stderr
    assert "4 tasks x 80 instances, d=6" in r.stdout
    r = omtl("run", "--data", out, "--algo", "arow", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tasks"] == 4
    for args, message in ((["--dims", "3"], "--dims applies to the test beds"),
                          (["--family", "unrelated", "--clusters", "3"], "--clusters applies to --family clustered")):
        r = omtl("data", "synth", "-o", tmp_path / "x.h5", *args)
        assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "x.h5").exists()


def test_normalize_keeps_the_tasks_and_labels_at_unit_norm():
    """--normalize: the same labels, and instances that are the raw ones scaled to norm 1."""
    _, X, y = generate_testbed("clustered", tasks=3, samples=50, dims=8, seed=4)
    _, Xn, yn = generate_testbed("clustered", tasks=3, samples=50, dims=8, seed=4, normalize=True)
    for a, an, b, bn in zip(X, Xn, y, yn):
        np.testing.assert_array_equal(b, bn)
        np.testing.assert_allclose(np.linalg.norm(an, axis=1), 1.0, rtol=1e-12)
        np.testing.assert_allclose(an * np.linalg.norm(a, axis=1, keepdims=True), a, rtol=1e-12)


def old_testbed(family, tasks=10, samples=300, dims=50, clusters=2, spread=0.3, noise=0.5, seed=0,
                normalize=False):
    """The test beds as release 1 drew them, one task at a time (kept to pin the values)."""
    W = task_weights(family, tasks, dims, clusters, spread, seed)
    X_list, y_list = [], []
    for k in range(tasks):
        rng = np.random.default_rng([seed, k])
        X = rng.normal(size=(samples, dims))
        margin = X @ W[k] + noise * rng.normal(size=samples)
        if normalize:
            X /= np.linalg.norm(X, axis=1, keepdims=True)
        X_list.append(X)
        y_list.append(np.where(margin >= 0.0, 1, -1).astype(np.int8))
    return X_list, y_list


@pytest.mark.parametrize("family", ["identical", "clustered", "unrelated"])
@pytest.mark.parametrize("kw", [{}, {"tasks": 7, "samples": 33, "dims": 5, "seed": 3, "normalize": True},
                                {"tasks": 4, "samples": 50, "dims": 8, "clusters": 3, "noise": 0.0,
                                 "seed": 2 ** 35}])
def test_the_test_beds_give_the_values_they_always_gave(family, kw):
    from omtl_mpi.data.testbeds import testbed_blocks
    X, y = old_testbed(family, **kw)
    _, X2, y2 = generate_testbed(family, **kw)
    for a, b, c, e in zip(X, X2, y, y2):
        assert a.tobytes() == b.tobytes() and c.tobytes() == e.tobytes()
    blocks = list(testbed_blocks(family, rows=100, **kw))       # a few tasks per block
    assert np.concatenate([b[1] for b in blocks]).tobytes() == np.concatenate(X).tobytes()
    assert np.concatenate([b[2] for b in blocks]).tobytes() == np.concatenate(y).tobytes()
