"""Task-stream format, loader validation, synthetic family, npz import, data info; hostile task
files and npz archives (hypothesis: only the project's one-line errors escape) and `data synth`'s
refusals of bad numbers and hostile values."""
import os

import h5py
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import CASES, HOSTILE, allowed, forked, one_line_errors, refused
from conftest import HOSTILE_FAST as FAST, HOSTILE_NAMES as names, HOSTILE_VALUES as values
from omtl_mpi.data import (FileSource, SyntheticSource, generate, import_npz, info, load_tasks,
                           read_meta, write_tasks)
from omtl_mpi.data.synthetic import features, task_parameters, task_rngs
from omtl_mpi.errors import DataError, UserError
from test_taskfile_v2 import write_v1


def tasks(K=3, n=(5, 7, 6), d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(n[k], d)) for k in range(K)]
    y = [np.where(rng.normal(size=n[k]) > 0, 1, -1).astype(np.int8) for k in range(K)]
    return [f"t{k}" for k in range(K)], X, y


def test_round_trip_unequal_lengths(tmp_path):
    names, X, y = tasks()
    path = tmp_path / "t.h5"
    write_tasks(path, names, X, y, source="unit", description="three tasks")
    meta = read_meta(path)
    assert meta.names == tuple(names) and meta.dim == 4 and list(meta.lengths) == [5, 7, 6]
    assert meta.source == "unit"
    got = load_tasks(meta, [0, 1, 2])
    for k in range(3):
        np.testing.assert_array_equal(got.X[k], X[k])
        np.testing.assert_array_equal(got.y[k], y[k])
    assert not os.listdir(tmp_path) == [] and sorted(os.listdir(tmp_path)) == ["t.h5"]


def test_load_reads_only_the_asked_tasks(tmp_path, monkeypatch):
    """Of a version 1 file, only the task's group (version 2: tests/test_taskfile_v2.py)."""
    names, X, y = tasks()
    path = tmp_path / "t.h5"
    write_v1(path, names, X, y)
    read = []
    original = h5py.Dataset.__getitem__

    def spy(self, key):
        read.append(self.name)
        return original(self, key)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", spy)
    got = load_tasks(read_meta(path), [1])
    assert got.names == ("t1",) and got.X[0].shape == (7, 4)
    assert read and all(name.startswith("/tasks/0001/") for name in read)


def write_raw(path, task_arrays, names=None):
    with h5py.File(path, "w") as f:
        g = f.create_group("tasks")
        for k, (X, y) in task_arrays.items():
            t = g.create_group(f"{k:04d}")
            t.attrs["name"] = (names or {}).get(k, f"t{k}")
            t.create_dataset("X", data=X)
            t.create_dataset("y", data=y)


@pytest.mark.parametrize("case, expected", [
    ("nan", "task 1 ('t1'): non-finite feature values (NaN or inf) in 2 row(s), first at row 3"),
    ("labels", "task 0 ('t0'): labels must be -1/+1 (or 0/1), found 2 at row 1"),
    ("dims", "task 2 ('t2') has d=5 features but task 0 ('t0') has d=4"),
    ("empty", "task 1 ('t1'): the task is empty"),
    ("missing", "task group /tasks/0001 is missing"),
    ("rows", "task 0 ('t0'): 6 feature rows but 5 labels"),
])
def test_loader_reports_each_problem_with_task_and_row(tmp_path, case, expected):
    rng = np.random.default_rng(0)
    arrays = {k: (rng.normal(size=(6, 4)), np.ones(6, dtype=np.int8)) for k in range(3)}
    if case == "nan":
        arrays[1][0][3, 2] = np.nan
        arrays[1][0][5, 0] = np.inf
    elif case == "labels":
        arrays[0] = (arrays[0][0], np.array([1, 2, -1, 1, 1, 1]))
    elif case == "dims":
        arrays[2] = (rng.normal(size=(6, 5)), np.ones(6))
    elif case == "empty":
        arrays[1] = (np.zeros((0, 4)), np.zeros(0))
    elif case == "missing":
        del arrays[1]
    elif case == "rows":
        arrays[0] = (arrays[0][0], np.ones(5))
    path = tmp_path / "bad.h5"
    write_raw(path, arrays)
    with pytest.raises(DataError) as err:
        load_tasks(read_meta(path), [0, 1, 2])
    assert expected in str(err.value)
    assert str(path) in str(err.value)


def test_all_problems_are_listed_one_per_line(tmp_path):
    rng = np.random.default_rng(0)
    X0, X1 = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    X0[0, 0] = np.nan
    write_raw(tmp_path / "b.h5", {0: (X0, np.ones(4)), 1: (X1, np.full(4, 3))})
    with pytest.raises(DataError) as err:
        load_tasks(read_meta(tmp_path / "b.h5"), [0, 1])
    assert len(err.value.lines) == 2


def test_zero_one_labels_are_mapped_with_a_notice(tmp_path):
    write_raw(tmp_path / "z.h5", {0: (np.ones((3, 2)), np.array([0, 1, 0]))})
    got = load_tasks(read_meta(tmp_path / "z.h5"), [0])
    np.testing.assert_array_equal(got.y[0], [-1, 1, -1])
    assert "mapped 0 -> -1" in got.notices[0]


@pytest.mark.parametrize("content, expected", [
    (b"this is not hdf5", "not a readable HDF5 file"),
    (None, "no such file"),
])
def test_not_a_task_file(tmp_path, content, expected):
    path = tmp_path / "x.h5"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(DataError, match=expected):
        read_meta(path)


def test_truncated_hdf5_and_wrong_layout(tmp_path):
    names, X, y = tasks()
    for write in (write_tasks, write_v1):
        good = tmp_path / "g.h5"
        write(good, names, X, y)
        cut = tmp_path / "cut.h5"
        cut.write_bytes(good.read_bytes()[:1000])
        with pytest.raises(DataError):
            read_meta(cut)
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["data"] = np.zeros(3)
    with pytest.raises(DataError, match="no /tasks group"):
        read_meta(tmp_path / "other.h5")


def test_write_refuses_bad_input_and_leaves_nothing(tmp_path):
    names, X, y = tasks()
    X[2][1, 1] = np.inf
    with pytest.raises(DataError, match="task 2"):
        write_tasks(tmp_path / "t.h5", names, X, y)
    with pytest.raises(DataError, match="used twice"):
        write_tasks(tmp_path / "t.h5", ["a", "a", "b"], *tasks()[1:])
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- synthetic
def test_synthetic_is_the_papers_family():
    a, theta = task_parameters(5, seed=0)
    np.testing.assert_array_equal(a[0], [0, 1, 1, 1, 1])
    assert theta[0] == 0.0
    steps = np.diff(a, axis=0)
    assert 0.02 < steps.std() < 0.3                            # N(0, 0.1^2) walk
    names, X, y = generate(tasks=5, samples=2000, seed=0)
    p1, p2 = X[0][:, 0], X[0][:, 1]
    np.testing.assert_allclose(X[0][:, 2:], np.stack([p1 * p2, p1 ** 2, p2 ** 2, p1 ** 3, p2 ** 3,
                                                     p1 * p2 ** 2, p1 ** 2 * p2], axis=1))
    assert np.abs(X[0][:, :2]).max() <= 3.0
    # task 0: theta = 0, a0 = 0: label = sign(p2 - h(p1))
    h = np.sin(p1) + np.sin(2 * p1) + np.cos(p1) + np.cos(2 * p1)
    np.testing.assert_array_equal(y[0], np.where(p2 - h >= 0, 1, -1))
    for yk in y:
        assert 0.4 < np.mean(yk == 1) < 0.6


def test_synthetic_reproducible_and_sliceable():
    full = generate(tasks=4, samples=300, seed=7)
    again = generate(tasks=4, samples=300, seed=7)
    part = generate(tasks=4, samples=300, seed=7, only=[2, 3])
    for k in range(4):
        assert full[1][k].tobytes() == again[1][k].tobytes()
    assert part[0] == ["task2", "task3"]
    assert part[1][0].tobytes() == full[1][2].tobytes() and part[2][1].tobytes() == full[2][3].tobytes()
    other = generate(tasks=4, samples=300, seed=8)
    assert other[1][0].tobytes() != full[1][0].tobytes()


def old_generate(tasks, samples, seed, normalize=False):
    """The paper's family as release 1 generated it, one task at a time (kept to pin the values:
    results already published depend on them)."""
    rng = np.random.default_rng(seed)
    a = np.empty((tasks, 5))
    theta = np.empty(tasks)
    a[0] = (0.0, 1.0, 1.0, 1.0, 1.0)
    theta[0] = 0.0
    for k in range(1, tasks):
        a[k] = a[k - 1] + rng.normal(0.0, 0.1, size=5)
        theta[k] = theta[k - 1] + rng.normal(0.0, 0.1 * np.pi / 4)
    X_list, y_list = [], []
    for k in range(tasks):
        p = np.random.default_rng([seed, k]).uniform(-3.0, 3.0, size=(samples, 2))
        c, s = np.cos(theta[k]), np.sin(theta[k])
        q1 = c * p[:, 0] - s * p[:, 1]
        q2 = s * p[:, 0] + c * p[:, 1]
        a0, a1, a2, a3, a4 = a[k]
        z = q1 - a0
        h = a1 * np.sin(z) + a2 * np.sin(2 * z) + a3 * np.cos(z) + a4 * np.cos(2 * z)
        p1, p2 = p[:, 0], p[:, 1]
        X = np.stack([p1, p2, p1 * p2, p1 ** 2, p2 ** 2, p1 ** 3, p2 ** 3, p1 * p2 ** 2,
                      p1 ** 2 * p2], axis=1)
        if normalize:
            X /= np.linalg.norm(X, axis=1, keepdims=True)
        X_list.append(X)
        y_list.append(np.where(q2 - h >= 0.0, 1, -1).astype(np.int8))
    return a, theta, X_list, y_list


@pytest.mark.parametrize("tasks, samples, seed, normalize", [
    (5, 300, 0, False), (9, 101, 3, True), (60, 7, 2 ** 40 + 3, False), (3, 1, 12, True)])
def test_the_generator_gives_the_values_it_always_gave(tasks, samples, seed, normalize):
    """Bit for bit: vectorised over blocks of tasks, the values are those of one task at a time."""
    a, theta, X, y = old_generate(tasks, samples, seed, normalize)
    a2, theta2 = task_parameters(tasks, seed)
    assert a.tobytes() == a2.tobytes() and theta.tobytes() == theta2.tobytes()
    _, X2, y2 = generate(tasks, samples, seed, normalize)
    for k in range(tasks):
        assert X[k].tobytes() == X2[k].tobytes() and y[k].tobytes() == y2[k].tobytes(), k
    part = generate(tasks, samples, seed, normalize, only=[tasks - 1, 0])
    assert part[1][0].tobytes() == X[-1].tobytes() and part[2][1].tobytes() == y[0].tobytes()
    from omtl_mpi.data.synthetic import blocks
    flat = list(blocks(tasks, samples, seed, normalize, rows=2 * samples + 1))   # 2 tasks a block
    assert np.concatenate([b[1] for b in flat]).tobytes() == np.concatenate(X).tobytes()
    assert [n for b in flat for n in b[0]] == [f"task{k}" for k in range(tasks)]


def test_task_generators_are_numpys():
    """task_rngs re-seeds one generator per task: the draws of default_rng([seed, k])."""
    for seed in (0, 5, 2 ** 32 + 1, 2 ** 63 - 1):
        # k >= 2**32 is seeded numpy's way (the vectorised seeding takes 32-bit task indices)
        for ks in ([0, 1, 7, 2 ** 31 - 1, 2 ** 32 - 1, 3], [3, 2 ** 32]):
            got = [rng.standard_normal(3).tolist() for rng in task_rngs(seed, ks)]
            assert got == [np.random.default_rng([seed, k]).standard_normal(3).tolist() for k in ks]
            got = [rng.integers(0, 5, size=3).tolist() for rng in task_rngs(seed, ks)]
            assert got == [np.random.default_rng([seed, k]).integers(0, 5, size=3).tolist() for k in ks]


def test_features_are_the_monomials():
    p = np.random.default_rng(0).uniform(-3, 3, size=(50, 2))
    p1, p2 = p[:, 0], p[:, 1]
    expected = np.stack([p1, p2, p1 * p2, p1 ** 2, p2 ** 2, p1 ** 3, p2 ** 3, p1 * p2 ** 2,
                         p1 ** 2 * p2], axis=1)
    assert features(p).tobytes() == expected.tobytes()


def test_synthetic_normalize():
    _, X, _ = generate(tasks=2, samples=50, seed=0, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(X[1], axis=1), 1.0)


def test_sources_agree(tmp_path):
    names, X, y = generate(tasks=3, samples=40, seed=1)
    write_tasks(tmp_path / "s.h5", names, X, y)
    a = FileSource(tmp_path / "s.h5").load([1, 2])
    b = SyntheticSource(tasks=3, samples=40, seed=1).load([1, 2])
    for k in range(2):
        np.testing.assert_array_equal(a.X[k], b.X[k])
        np.testing.assert_array_equal(a.y[k], b.y[k])


# ---------------------------------------------------------------- npz and info
def test_import_npz_paper_layout(tmp_path):
    rng = np.random.default_rng(0)
    xs, ys = rng.normal(size=(3, 20, 4)), rng.integers(0, 2, size=(3, 20, 1))
    np.savez(tmp_path / "p.npz", xs=xs, ys=ys)
    meta = import_npz(tmp_path / "p.npz", tmp_path / "p.h5")
    assert meta.n_tasks == 3 and meta.dim == 4
    got = load_tasks(meta, [2])
    np.testing.assert_array_equal(got.y[0], np.where(ys[2, :, 0] == 1, 1, -1))
    np.testing.assert_array_equal(got.X[0], xs[2])


def test_import_npz_per_task_layout(tmp_path):
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "q.npz", X_0=rng.normal(size=(5, 2)), y_0=np.ones(5),
             X_1=rng.normal(size=(8, 2)), y_1=-np.ones(8))
    meta = import_npz(tmp_path / "q.npz", tmp_path / "q.h5")
    assert list(meta.lengths) == [5, 8]
    # what was loaded, not only how much: each task's own arrays, in order
    with np.load(tmp_path / "q.npz") as z:
        got = load_tasks(meta, [0, 1])
        for k in range(2):
            np.testing.assert_array_equal(got.X[k], z[f"X_{k}"])
            np.testing.assert_array_equal(got.y[k], z[f"y_{k}"])


def test_import_npz_refuses_pickles_and_garbage(tmp_path):
    np.savez(tmp_path / "obj.npz", xs=np.array([{"a": 1}], dtype=object), ys=np.ones(1))
    with pytest.raises(DataError, match="pickled"):
        import_npz(tmp_path / "obj.npz", tmp_path / "o.h5")
    np.savez(tmp_path / "ok.npz", xs=np.ones((2, 3, 2)), ys=np.ones((2, 3)))
    (tmp_path / "cut.npz").write_bytes((tmp_path / "ok.npz").read_bytes()[:100])
    with pytest.raises(DataError, match="npz"):
        import_npz(tmp_path / "cut.npz", tmp_path / "c.h5")
    np.savez(tmp_path / "nolabels.npz", foo=np.ones(3))
    with pytest.raises(DataError, match="no task arrays"):
        import_npz(tmp_path / "nolabels.npz", tmp_path / "n.h5")
    assert not any(p.suffix == ".h5" for p in tmp_path.iterdir())


def test_info_is_table_one(tmp_path):
    write_tasks(tmp_path / "i.h5", ["a", "b"], [np.ones((4, 3)), np.ones((2, 3))],
                [np.array([1, 1, -1, -1]), np.array([1, 1])])
    facts = info(tmp_path / "i.h5")
    assert (facts["tasks"], facts["dims"], facts["total"], facts["max"], facts["min"]) == (2, 3, 6, 4, 2)
    assert facts["positive_ratio"] == pytest.approx((0.5 + 1.0) / 2)


def test_non_numeric_features_and_bad_indices_are_clear_errors(tmp_path):
    path = tmp_path / "t.h5"
    with pytest.raises(DataError, match=r"task 0 \('a'\): features must be numbers, got dtype object"):
        write_tasks(path, ["a"], [np.array([[1.0, None]], dtype=object)], [np.array([1])])
    assert list(tmp_path.iterdir()) == []
    write_tasks(path, ["a", "b"], [np.ones((2, 3)), np.ones((3, 3))], [np.ones(2), -np.ones(3)])
    meta = read_meta(path)
    for bad in (2, -1):
        with pytest.raises(DataError, match=rf"task index {bad} out of range; the file has 2 task\(s\)"):
            load_tasks(meta, [0, bad])


def test_scalar_features_dataset_is_reported_not_crashed(tmp_path):
    path = tmp_path / "scalar.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("tasks/0000")
        g.create_dataset("X", data=1.0)
        g.create_dataset("y", data=np.array([1]))
    with pytest.raises(DataError, match=r"task 0 \('task0'\): X must be 2-D .* got shape \(\)"):
        read_meta(path)


# ------------------------------- hostile input (hypothesis): only the project's one-line errors


@FAST
@given(st.binary(max_size=2048))
def test_garbage_bytes_as_task_file(tmp_path, blob):
    path = tmp_path / "x.h5"
    path.write_bytes(blob)
    with pytest.raises(UserError) as err:
        read_meta(path)
    one_line_errors(err.value)


@FAST
@given(cut=st.integers(min_value=0, max_value=4000))
def test_truncated_task_file(tmp_path, cut):
    from omtl_mpi.data import write_tasks
    good = tmp_path / "good.h5"
    if not good.exists():
        write_tasks(good, ["a", "b"], [np.ones((5, 3)), np.zeros((4, 3))], [np.ones(5), -np.ones(4)])
    data = good.read_bytes()
    bad = tmp_path / "cut.h5"
    bad.write_bytes(data[: min(cut, len(data) - 1)])
    try:
        meta = read_meta(bad)
        load_tasks(meta, range(meta.n_tasks))
    except UserError as exc:
        one_line_errors(exc)


@FAST
@given(X=st.lists(st.lists(values, min_size=1, max_size=3), min_size=0, max_size=4),
       y=st.lists(values, min_size=0, max_size=4), name=names)
def test_hostile_task_groups(tmp_path, X, y, name):
    path = tmp_path / "h.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("tasks/0000")
        g.attrs["name"] = name
        width = {len(r) for r in X}
        g["X"] = np.array(X, dtype=float) if len(width) == 1 else np.zeros((0,))
        g["y"] = np.array(y, dtype=float)
    try:
        meta = read_meta(path)
        load_tasks(meta, [0])
    except UserError as exc:
        one_line_errors(exc)


@FAST
@given(kind=st.sampled_from(["object", "strings", "ragged", "ok"]), K=st.integers(1, 3))
def test_hostile_npz(tmp_path, kind, K):
    src, out = tmp_path / "a.npz", tmp_path / "a.h5"
    out.unlink(missing_ok=True)          # tmp_path is shared by all the examples of one test
    if kind == "object":
        np.savez(src, xs=np.array([{"evil": 1}] * K, dtype=object), ys=np.ones((K, 1)))
    elif kind == "strings":
        np.savez(src, xs=np.full((K, 2, 2), "x"), ys=np.ones((K, 2)))
    elif kind == "ragged":
        np.savez(src, X_0=np.ones((2, 2)), y_0=np.ones(3))
    else:
        np.savez(src, xs=np.ones((K, 2, 2)), ys=np.ones((K, 2)))
    try:
        import_npz(src, out)
        assert kind == "ok"
    except UserError as exc:
        assert kind != "ok"
        one_line_errors(exc)
        assert not out.exists()


# --------------------------------------------------------- data synth: bad numbers are one line
@pytest.mark.usefixtures("eight_gib")   # every machine looks like one with 8 GiB free
@pytest.mark.parametrize("args, needle", [
    (["--seed", "-1"], "--seed must be between 0 and"),
    (["--seed", str(2 ** 70)], "--seed must be between 0 and"),
    (["--tasks", "0"], "--tasks must be >= 1, got 0"),
    (["--tasks", "-3"], "--tasks must be >= 1, got -3"),
    (["--samples", "0"], "--samples must be >= 1, got 0"),
    (["--family", "clustered", "--dims", "0"], "--dims must be >= 1, got 0"),
    (["--family", "clustered", "--clusters", "0"], "--clusters must be >= 2, got 0"),
    (["--family", "unrelated", "--spread", "nan"], "--spread must be a finite number"),
])
def test_synth_bad_numbers(tmp_path, capsys, args, needle):
    refused(capsys, "data", "synth", *args, "-o", tmp_path / "s.h5", needle=needle)
    assert not (tmp_path / "s.h5").exists()



@CASES
@given(option=st.sampled_from(["--tasks", "--samples", "--seed"]), value=HOSTILE)
def test_hostile_synth_options(tmp_path, option, value):
    out = tmp_path / "s.h5"
    out.unlink(missing_ok=True)
    args = ["data", "synth", "-o", out, "--tasks", "2", "--samples", "20", option, value]
    if allowed(*forked(*args), args) == "refused":
        assert not out.exists()
