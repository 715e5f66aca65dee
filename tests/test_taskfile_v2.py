"""Task-file format version 2 (flat /X and /y, /offsets, /names): round trips through every
writer and reader, version 1 files read exactly as before, and every hostile version 2 file
refused in one line (through the Python API and through 'omtl-mpi data info')."""
import os

import h5py
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import cli, omtl_forked as omtl, one_line_errors
from conftest import HOSTILE_FAST as FAST, HOSTILE_NAMES as names, HOSTILE_VALUES as values
from omtl_mpi.data import (FlatStreams, TaskFileWriter, info, load_block, load_tasks, read_meta,
                           write_tasks)
from omtl_mpi.data import footprint, taskfile
from omtl_mpi.errors import DataError, UserError

QUICK = 60


# --------------------------------------------------------------------------- helpers
def write_v1(path, names, X_list, y_list, source="", description="", raw=False):
    """A version 1 task file (one group per task), written as release 1's write_tasks wrote it
    (``raw``: the arrays as they are, unconverted and unchecked)."""
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "omtl-mpi-tasks"
        f.attrs["format_version"] = 1
        f.attrs["source"] = source
        f.attrs["description"] = description
        g = f.create_group("tasks")
        for k, (name, X, y) in enumerate(zip(names, X_list, y_list)):
            t = g.create_group(f"{k:04d}")
            t.attrs["name"] = name
            t.create_dataset("X", data=X if raw else np.ascontiguousarray(X, dtype=np.float64))
            t.create_dataset("y", data=y if raw else np.asarray(y, dtype=np.int8))
    return path


def streams(lengths=(5, 9, 1, 7), d=3, seed=0):
    """Tasks of unequal lengths (one named in UTF-8), labels -1/+1."""
    rng = np.random.default_rng(seed)
    names = [f"t{k}" for k in range(len(lengths))]
    names[1] = "caf\u00e9 \u4e2d"
    X = [rng.normal(size=(n, d)) for n in lengths]
    y = [np.where(rng.normal(size=n) > 0, 1, -1).astype(np.int8) for n in lengths]
    return names, X, y


NAMES = ["a", "b", "c"]
LENGTHS = (4, 6, 5)


def raw_v2(path, version=2, **replace):
    """A version 2 file written directly (no validation): 3 tasks a, b, c of 4, 6 and 5
    instances, d = 3; ``replace`` sets a dataset to another value, a link, or None (left out)."""
    rng = np.random.default_rng(1)
    blob = "".join(NAMES).encode()
    parts = {"X": rng.normal(size=(sum(LENGTHS), 3)),
             "y": np.resize(np.array([1, -1], dtype=np.int8), sum(LENGTHS)),
             "offsets": np.array([0, 4, 10, 15], dtype=np.int64),
             "names": np.frombuffer(blob, dtype=np.uint8),
             "name_offsets": np.array([0, 1, 2, 3], dtype=np.int64)}
    parts.update(replace)
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "omtl-mpi-tasks"
        f.attrs["format_version"] = version
        for key, value in parts.items():
            if value is not None:
                f[key] = value
    return path


def one_line(exc) -> str:
    lines = str(exc).splitlines()
    assert len(lines) == 1, str(exc)
    return lines[0]


def refused_by_info(capsys, path, fragment: str) -> None:
    """'omtl-mpi data info PATH' exits 2 with one error line holding ``fragment``, no traceback."""
    code, _, err = cli(capsys, "data", "info", path)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert fragment in lines[0] and "Traceback" not in err, err


# --------------------------------------------------------------------------- round trips
def test_write_tasks_writes_version_2_and_every_reader_reads_it(tmp_path):
    names, X, y = streams()
    path = tmp_path / "t.h5"
    write_tasks(path, names, X, y, source="unit", description="four tasks")
    with h5py.File(path) as f:
        assert set(f) == {"X", "y", "offsets", "names", "name_offsets"}
        assert f.attrs["format"] == "omtl-mpi-tasks" and f.attrs["format_version"] == 2
        assert f["X"].dtype == np.float64 and f["X"].shape == (22, 3) and f["X"].chunks[1] == 3
        assert f["y"].dtype == np.int8 and f["offsets"].dtype == np.int64
        assert f["offsets"][()].tolist() == [0, 5, 14, 15, 22]
        assert f["X"].compression is None
    meta = read_meta(path)
    assert meta.names == tuple(names) and meta.dim == 3 and meta.version == 2
    assert meta.lengths.tolist() == [5, 9, 1, 7] and meta.offsets.tolist() == [0, 5, 14, 15, 22]
    assert (meta.source, meta.description, meta.n_tasks) == ("unit", "four tasks", 4)
    flat = load_block(meta, 0, 4)
    assert isinstance(flat, FlatStreams) and flat.X.flags.c_contiguous and flat.y.dtype == np.int8
    np.testing.assert_array_equal(flat.X, np.concatenate(X))
    np.testing.assert_array_equal(flat.y, np.concatenate(y))
    part = load_block(meta, 1, 3)
    assert (part.start, part.stop, part.names, part.offsets.tolist()) == (1, 3, tuple(names[1:3]), [0, 9, 10])
    np.testing.assert_array_equal(part.X, np.concatenate(X[1:3]))
    split = part.split()
    np.testing.assert_array_equal(split.X[1], X[2])
    got = load_tasks(meta, [3, 1, 1, 0])                # any order, repeats
    assert got.names == (names[3], names[1], names[1], names[0])
    for i, k in enumerate([3, 1, 1, 0]):
        np.testing.assert_array_equal(got.X[i], X[k])
        np.testing.assert_array_equal(got.y[i], y[k])
    facts = info(path)
    assert (facts["tasks"], facts["dims"], facts["total"], facts["max"], facts["min"]) == (4, 3, 22, 9, 1)
    assert facts["format_version"] == 2 and facts["median"] == 6.0 and facts["mean"] == 5.5
    assert [t["samples"] for t in facts["per_task"]] == [5, 9, 1, 7]
    for t, yk in zip(facts["per_task"], y):
        assert t["positive_ratio"] == float(np.mean(yk == 1))


def test_the_streaming_writer_writes_what_write_tasks_writes(tmp_path):
    names, X, y = streams()
    write_tasks(tmp_path / "a.h5", names, X, y, source="s", description="d")
    with TaskFileWriter(tmp_path / "b.h5", source="s", description="d") as w:
        w.add(names[:2], np.concatenate(X[:2]), np.concatenate(y[:2]), [5, 9])
        w.add(names[2:], np.concatenate(X[2:]), np.concatenate(y[2:]), np.array([1, 7]))
        assert w.n_tasks == 4
    with h5py.File(tmp_path / "a.h5") as a, h5py.File(tmp_path / "b.h5") as b:
        for key in ("X", "y", "offsets", "names", "name_offsets"):
            np.testing.assert_array_equal(a[key][()], b[key][()])
        assert dict(a.attrs) == dict(b.attrs)
    assert sorted(os.listdir(tmp_path)) == ["a.h5", "b.h5"]


def test_a_version_1_file_reads_exactly_as_before(tmp_path):
    names, X, y = streams()
    y[2] = np.array([0])                                # 0/1 labels: a notice naming the task
    y[3] = (y[3] > 0).astype(np.int8)
    old = write_v1(tmp_path / "old" / "t.h5" if (tmp_path / "old").mkdir() is None else None,
                   names, X, y, source="s", description="d")
    new = tmp_path / "new" / "t.h5"
    (tmp_path / "new").mkdir()
    write_tasks(new, names, X, y, source="s", description="d")
    m1, m2 = read_meta(old), read_meta(new)
    assert (m1.version, m2.version) == (1, 2)
    for field in ("names", "dim", "source", "description", "n_tasks"):
        assert getattr(m1, field) == getattr(m2, field), field
    np.testing.assert_array_equal(m1.lengths, m2.lengths)
    np.testing.assert_array_equal(m1.offsets, m2.offsets)
    s1 = load_tasks(m1, [0, 1, 2, 3])
    s2 = load_tasks(m2, [0, 1, 2, 3])
    for a, b in zip(s1.X + s1.y, s2.X + s2.y):
        np.testing.assert_array_equal(a, b)
    # the 0/1 mapping is said for version 1 files as before (the version 2 file holds -1/+1)
    assert s1.notices == [f"{old}: task 2 ('t2'): labels are 0/1; mapped 0 -> -1",
                          f"{old}: task 3 ('t3'): labels are 0/1; mapped 0 -> -1"]
    b1, b2 = load_block(m1, 1, 4), load_block(m2, 1, 4)
    for a, b in ((b1.X, b2.X), (b1.y, b2.y), (b1.offsets, b2.offsets)):
        np.testing.assert_array_equal(a, b)
    f1, f2 = info(old), info(new)
    assert {k: v for k, v in f1.items() if k not in ("path", "format_version")} == \
        {k: v for k, v in f2.items() if k not in ("path", "format_version")}
    assert (f1["format_version"], f2["format_version"]) == (1, 2)


def bad_values(case: str):
    """Three tasks a, b, c of 4, 6 and 5 instances whose values have a problem (``case``)."""
    rng = np.random.default_rng(2)
    X = [rng.normal(size=(n, 3)) for n in LENGTHS]
    y = [np.resize(np.array([1.0, -1.0]), n) for n in LENGTHS]
    if case == "nan":
        X[1][2, 0] = np.nan
        X[1][4, 2] = np.inf
    elif case == "labels":
        y[2][3] = 2.0
    elif case == "label-nan":
        y[0][1] = np.nan
    elif case == "both":
        X[0][0, 0] = -np.inf
        y[2][0] = 5.0
    return X, y


@pytest.mark.parametrize("case, lines", [
    ("nan", ["task 1 ('b'): non-finite feature values (NaN or inf) in 2 row(s), first at row 2; "
             "clean or drop those rows"]),
    ("labels", ["task 2 ('c'): labels must be -1/+1 (or 0/1), found 2.0 at row 3"]),
    ("label-nan", ["task 0 ('a'): non-finite label at row 1"]),
    ("both", ["task 0 ('a'): non-finite feature values (NaN or inf) in 1 row(s), first at row 0; "
              "clean or drop those rows",
              "task 2 ('c'): labels must be -1/+1 (or 0/1), found 5.0 at row 0"]),
])
def test_bad_values_give_the_lines_version_1_gives(tmp_path, capsys, case, lines):
    X, y = bad_values(case)
    old = write_v1(tmp_path / "v1.h5", NAMES, X, y, raw=True)
    new = raw_v2(tmp_path / "v2.h5", X=np.concatenate(X), y=np.concatenate(y))
    for path in (old, new):
        with pytest.raises(DataError) as err:
            load_tasks(read_meta(path), [0, 1, 2])
        assert err.value.lines == [f"{path}: {line}" for line in lines], (path, str(err.value))
    with pytest.raises(DataError) as err:
        load_block(read_meta(new), 0, 3)
    assert err.value.lines == [f"{new}: {line}" for line in lines]
    # data info reads the labels only: it does not look at the values
    assert cli(capsys, "data", "info", new)[0] == 0
    with pytest.raises(DataError) as err:           # and the writers refuse the same values
        write_tasks(tmp_path / "w.h5", NAMES, X, y)
    assert err.value.lines == [f"{tmp_path / 'w.h5'}: {line}" for line in lines]
    assert not (tmp_path / "w.h5").exists()


def test_many_tasks_with_the_same_problem_or_notice_are_counted(tmp_path):
    K = 30
    X = np.zeros((2 * K, 2))
    X[1::2, 0] = np.nan                                 # every task's second row
    y = np.tile(np.array([0, 1], dtype=np.int8), K)
    offsets = np.arange(0, 2 * K + 1, 2)
    names = [f"n{k}" for k in range(K)]
    blob = "".join(names).encode()
    name_offsets = np.concatenate(([0], np.cumsum([len(n) for n in names])))
    bad = raw_v2(tmp_path / "bad.h5", X=X, y=y, offsets=offsets,
                 names=np.frombuffer(blob, dtype=np.uint8), name_offsets=name_offsets)
    with pytest.raises(DataError) as err:
        load_block(read_meta(bad), 0, K)
    assert len(err.value.lines) == taskfile.SHOWN + 1
    assert err.value.lines[0] == (f"{bad}: task 0 ('n0'): non-finite feature values (NaN or inf) in "
                                  "1 row(s), first at row 1; clean or drop those rows")
    assert err.value.lines[-1] == (f"{bad}: and {K - taskfile.SHOWN} more task(s) with such "
                                   f"problems (the first {taskfile.SHOWN} are listed)")
    good = raw_v2(tmp_path / "good.h5", X=np.zeros((2 * K, 2)), y=y, offsets=offsets,
                  names=np.frombuffer(blob, dtype=np.uint8), name_offsets=name_offsets)
    flat = load_block(read_meta(good), 0, K)
    assert flat.y.tolist() == [-1, 1] * K
    assert flat.notices == [f"{good}: labels are 0/1 in {K} tasks (task 0 ('n0'), task 1 ('n1'), "
                            "task 2 ('n2'), ...); mapped 0 -> -1"]
    few = load_block(read_meta(good), 3, 5)
    assert few.notices == [f"{good}: task 3 ('n3'): labels are 0/1; mapped 0 -> -1",
                           f"{good}: task 4 ('n4'): labels are 0/1; mapped 0 -> -1"]


def test_a_block_reads_only_its_own_rows(tmp_path, monkeypatch):
    names, X, y = streams()
    path = tmp_path / "t.h5"
    write_tasks(path, names, X, y)
    meta = read_meta(path)
    read = []
    original = h5py.Dataset.__getitem__

    def spy(self, key):
        read.append((self.name, key))
        return original(self, key)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", spy)
    got = load_tasks(meta, [1])
    assert got.names == (names[1],) and got.X[0].shape == (9, 3)
    assert sorted(read) == [("/X", slice(5, 14)), ("/y", slice(5, 14))]
    read.clear()
    load_block(meta, 2, 4)
    assert sorted(read) == [("/X", slice(14, 22)), ("/y", slice(14, 22))]


def test_blocks_out_of_range_or_too_large_are_refused(tmp_path, monkeypatch):
    names, X, y = streams()
    write_tasks(tmp_path / "t.h5", names, X, y)
    meta = read_meta(tmp_path / "t.h5")
    for start, stop, message in ((0, 5, r"task index 4 out of range; the file has 4 task\(s\)"),
                                 (-1, 2, "task index -1 out of range"),
                                 (2, 2, "no task in the block 2..1")):
        with pytest.raises(DataError, match=message):
            load_block(meta, start, stop)
    monkeypatch.setattr(footprint, "available_memory", lambda: 100)
    with pytest.raises(DataError, match="the 2 task.s. this process would hold need"):
        load_block(meta, 0, 2)


# --------------------------------------------------------------------------- the writers
def test_the_streaming_writer_validates_each_chunk_and_leaves_nothing_on_failure(tmp_path):
    out = tmp_path / "w.h5"

    def refused(*chunks, match):
        with pytest.raises(DataError, match=match):
            with TaskFileWriter(out) as w:
                for chunk in chunks:
                    w.add(*chunk)
        assert os.listdir(tmp_path) == []

    ok = (["a"], np.ones((2, 3)), [1, -1], [2])
    refused(match="no tasks to write")
    refused(ok, (["a"], np.ones((1, 3)), [1], [1]), match="task name 'a' is used twice")
    refused(ok, (["b"], np.ones((1, 4)), [1], [1]),
            match=r"tasks have different numbers of features \[3, 4\]")
    refused((["a", "b"], np.ones((3, 3)), [1, 1, 1], [1, 1]),
            match="tasks 0..1: the lengths add up to 2 instances but there are 3 feature rows and 3 labels")
    refused((["a", "b"], np.ones((2, 3)), [1, 1], [2, 0]), match=r"task 1 \('b'\): the task is empty")
    refused((["a"], np.ones((2, 3)), [1, 3], [2]),
            match=r"task 0 \('a'\): labels must be -1/\+1 \(or 0/1\), found 3 at row 1")
    refused((["a"], np.array([[1.0, np.nan]]), [1], [1]), match="first at row 0")
    refused((["a"], np.ones(3), [1, 1, 1], [3]), match="features must be a 2-D array")
    refused((["a"], np.ones((1, 0)), [1], [1]), match="the features have no column")
    refused((["a"], np.ones((1, 2)), [1], [1.5]), match="lengths must be a 1-D sequence of whole numbers")
    refused((["\ud800"], np.ones((1, 2)), [1], [1]), match="cannot be written as UTF-8")
    with pytest.raises(RuntimeError, match="stop"):     # any exception: nothing is left
        with TaskFileWriter(out) as w:
            w.add(*ok)
            raise RuntimeError("stop")
    assert os.listdir(tmp_path) == []
    with TaskFileWriter(out) as w:                      # 0/1 labels are written as -1/+1
        w.add(["a"], np.ones((3, 2)), np.array([0, 1, 0]), [3])
    assert load_block(read_meta(out), 0, 1).y.tolist() == [-1, 1, -1]


def test_write_tasks_lists_every_problem_before_writing(tmp_path):
    X = [np.ones((2, 3)), np.ones((2, 4)), np.array([[1.0, np.nan, 1.0]] * 2), np.ones((0, 3))]
    y = [np.ones(2), np.ones(2), np.ones(2), np.ones(0)]
    with pytest.raises(DataError) as err:
        write_tasks(tmp_path / "w.h5", ["a", "a", "c", "d"], X, y)
    text = str(err.value)
    for fragment in ("task name 'a' is used twice", "task 3 ('d'): the task is empty",
                     "different numbers of features [3, 4]",
                     "task 2 ('c'): non-finite feature values"):
        assert fragment in text, text
    assert os.listdir(tmp_path) == []


def test_chunks_follow_the_size_of_the_file(tmp_path):
    names, X, y = streams()
    write_tasks(tmp_path / "small.h5", names, X, y)
    with h5py.File(tmp_path / "small.h5") as f:
        assert f["X"].chunks == (22, 3) and f["y"].chunks == (22,)
    with TaskFileWriter(tmp_path / "big.h5") as w:      # size unknown: about 1 MiB per chunk
        w.add(["a"], np.ones((10, 9)), np.ones(10), [10])
    with h5py.File(tmp_path / "big.h5") as f:
        assert f["X"].chunks == (2 ** 20 // 72, 9) and f["y"].chunks == (2 ** 20,)


# --------------------------------------------------------------------------- hostile files
def links(kind: str):
    return {"soft": h5py.SoftLink("/nowhere"), "external": h5py.ExternalLink("other.h5", "/X"),
            "inside": h5py.SoftLink("/kept")}[kind]


HOSTILE = {
    "offsets-float": ({"offsets": np.array([0.0, 4.0, 10.0, 15.0])}, "/offsets must be integers, got dtype float64"),
    "offsets-2d": ({"offsets": np.array([[0, 4], [10, 15]])}, "/offsets must be 1-D, got shape (2, 2)"),
    "offsets-one": ({"offsets": np.array([0])}, "/offsets holds 1 value(s); it must hold K+1 >= 2"),
    "offsets-start": ({"offsets": np.array([1, 4, 10, 15])}, "/offsets must start at 0, got 1"),
    "offsets-empty-task": ({"offsets": np.array([0, 4, 4, 15])},
                           "task 1 ('b'): the task is empty (no samples): /offsets 1 and 2 are both 4"),
    "offsets-decrease": ({"offsets": np.array([0, 10, 4, 15])},
                         "task 1 ('b'): /offsets decreases from 10 to 4; offsets must increase strictly"),
    "offsets-end": ({"offsets": np.array([0, 4, 10, 14])},
                    "/offsets ends at 14 but /X has 15 rows; it must end at the number of instances"),
    "offsets-length": ({"offsets": np.array([0, 4, 10, 12, 15])},
                       "/name_offsets gives 3 name(s) but /offsets 4 task(s); there must be one name per task"),
    "offsets-huge": ({"offsets": np.array([0, 4, 10, 2 ** 64 - 1], dtype=np.uint64)},
                     "/offsets holds values beyond 2^63"),
    "X-1d": ({"X": np.ones(15)}, "X must be 2-D (samples x features), got shape (15,)"),
    "X-strings": ({"X": np.full((15, 3), b"x")}, "X must be numeric, got dtype |S1"),
    "X-no-columns": ({"X": np.ones((15, 0))}, "X has no feature column (shape (15, 0))"),
    "y-2d": ({"y": np.ones((15, 1))}, "y must be 1-D, got shape (15, 1)"),
    "y-short": ({"y": np.ones(14)}, "15 feature rows but 14 labels"),
    "y-strings": ({"y": np.full(15, b"1")}, "y must be numeric, got dtype |S1"),
    "names-count": ({"name_offsets": np.array([0, 1, 3])},
                    "/name_offsets gives 2 name(s) but /offsets 3 task(s)"),
    "names-dtype": ({"names": np.ones(3)}, "/names must be a 1-D array of bytes (uint8, UTF-8)"),
    "names-end": ({"name_offsets": np.array([0, 1, 2, 7])},
                  "/name_offsets ends at 7 but /names holds 3 bytes"),
    "names-decrease": ({"name_offsets": np.array([0, 2, 1, 3])}, "/name_offsets decreases at task 1"),
    "missing": ({"offsets": None}, "/offsets missing; a version 2 task file holds /X, /y, /offsets"),
    "nothing": ({"X": None, "y": None, "offsets": None, "names": None, "name_offsets": None},
                "no /X, /y or /offsets; this is not an omtl-mpi task-stream file"),
    "X-soft-link": ({"X": links("soft")}, "/X is a soft link to /nowhere, which does not exist in the file"),
    "X-external-link": ({"X": links("external")},
                        "/X is an external link to /X in other.h5; links leaving the file are refused"),
    "y-link-inside": ({"y": links("inside")}, "/y is a soft link to /kept; a task file holds its arrays"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_version_2_file_is_one_line(tmp_path, capsys, case):
    replace, message = HOSTILE[case]
    path = raw_v2(tmp_path / "bad.h5", **replace)
    if case == "y-link-inside":
        with h5py.File(path, "r+") as f:
            f["kept"] = np.ones(15, dtype=np.int8)
    with pytest.raises(DataError) as err:
        read_meta(path)
    line = one_line(err.value)
    assert line.startswith(f"{path}: ") and message in line, line
    refused_by_info(capsys, path, message)


def test_every_structural_problem_is_listed(tmp_path):
    path = raw_v2(tmp_path / "bad.h5", X=np.ones(15), offsets=np.array([0.0, 15.0]),
                  names=np.ones(2))
    with pytest.raises(DataError) as err:
        read_meta(path)
    assert len(err.value.lines) == 3, str(err.value)


@pytest.mark.parametrize("version, message", [
    (4, "task-file format version 4; this release of omtl-mpi reads versions 1, 2 and 3"),
    ("2", "task-file format version 2; this release"),         # a string is not a version
])
def test_other_versions_are_refused(tmp_path, capsys, version, message):
    path = raw_v2(tmp_path / "v.h5", version=version)
    with pytest.raises(DataError) as err:
        read_meta(path)
    assert message in one_line(err.value)
    refused_by_info(capsys, path, message)


def damage_chunk(path, name: str, row: int = 0, rows: int | None = 4) -> None:
    """Store the dataset ``name`` gzip-compressed in chunks of ``rows`` rows (None: one chunk),
    then flip bytes in the middle of the chunk that holds ``row``."""
    with h5py.File(path, "r+") as f:
        values = f[name][()]
        del f[name]
        rows = rows or len(values)
        ds = f.create_dataset(name, data=values, chunks=(rows,) + values.shape[1:], compression="gzip")
        chunk = ds.id.get_chunk_info_by_coord((row // rows * rows,) + (0,) * (values.ndim - 1))
    n = max(1, min(16, chunk.size // 2))
    start = chunk.byte_offset + (chunk.size - n) // 2
    with open(path, "r+b") as fh:
        fh.seek(start)
        data = fh.read(n)
        fh.seek(start)
        fh.write(bytes(b ^ 0xFF for b in data))


def test_a_damaged_chunk_names_the_task(tmp_path, capsys):
    bad_x, bad_y = raw_v2(tmp_path / "x.h5"), raw_v2(tmp_path / "y.h5")
    damage_chunk(bad_x, "X", 9)                     # rows 8..11: tasks b (4..9) and c (10..14)
    damage_chunk(bad_y, "y", 12)                    # rows 12..14: task c
    with pytest.raises(DataError) as err:
        load_block(read_meta(bad_x), 0, 3)
    line = one_line(err.value)
    assert line.startswith(f"{bad_x}: task 1 ('b'): cannot read X (") and "the file is damaged" in line
    assert len(load_block(read_meta(bad_x), 0, 1).y) == 4      # the other tasks still read
    with pytest.raises(DataError, match=r"task 2 \('c'\): cannot read X"):
        load_tasks(read_meta(bad_x), [2])
    # data info reads the labels only
    assert info(bad_x)["tasks"] == 3
    refused_by_info(capsys, bad_y, f"{bad_y}: task 2 ('c'): cannot read y (")


def test_a_truncated_version_2_file_is_one_line(tmp_path, capsys):
    names, X, y = streams(lengths=(300, 200, 400), d=9)
    good = tmp_path / "good.h5"
    write_tasks(good, names, X, y)
    data = good.read_bytes()
    for cut in (100, 2000, len(data) // 3, len(data) // 2, len(data) - 100):
        bad = tmp_path / "cut.h5"
        bad.write_bytes(data[:cut])
        try:
            meta = read_meta(bad)
            load_block(meta, 0, meta.n_tasks)
        except DataError as exc:
            one_line(exc)
            assert str(exc).startswith(f"{bad}: ")
        code, _, err = cli(capsys, "data", "info", bad)
        assert code in (0, 2) and "Traceback" not in err
        if code:
            assert len(err.strip().splitlines()) == 1, err


def test_the_command_line_refuses_a_bad_file_in_one_line(tmp_path):
    """The same through a real process: exit 2, one line on stderr, no traceback."""
    path = raw_v2(tmp_path / "bad.h5", offsets=np.array([0, 4, 4, 15]))
    r = omtl("data", "info", path, timeout=QUICK)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "task 1 ('b'): the task is empty" in r.stderr


# --------------------------------------------------------------------------- data info
def test_info_of_many_tasks_shows_the_ends_unless_asked_for_all(tmp_path, capsys):
    K = 150
    lengths = np.arange(1, K + 1)
    with TaskFileWriter(tmp_path / "many.h5", description="many") as w:
        w.add([f"t{k}" for k in range(K)], np.ones((lengths.sum(), 2)),
              np.ones(lengths.sum()), lengths)
    code, out, _ = cli(capsys, "data", "info", tmp_path / "many.h5")
    assert code == 0
    lines = out.splitlines()
    assert "stream lengths: min 1, median 75.5, mean 75.5, max 150; format version 2" in out
    assert "  ... 140 more tasks (--all lists every task)" in lines
    assert lines[lines.index("") + 1].split() == ["task", "name", "samples", "pos", "ratio"]
    rows = [line for line in lines[lines.index("") + 2:] if "..." not in line]
    assert [int(r.split()[0]) for r in rows] == [0, 1, 2, 3, 4, 145, 146, 147, 148, 149]
    code, out, _ = cli(capsys, "data", "info", tmp_path / "many.h5", "--all")
    lines = out.splitlines()
    assert code == 0 and len(lines[lines.index("") + 2:]) == K
    assert "stream lengths: min 1, median 75.5, mean 75.5, max 150; format version 2" in out
    code, out, _ = cli(capsys, "data", "info", tmp_path / "many.h5", "--json")
    facts = __import__("json").loads(out)
    assert facts["per_task_omitted"] == 140 and len(facts["per_task"]) == 10
    assert facts["tasks"] == K and facts["positive_ratio"] == 1.0


def test_info_of_few_tasks_lists_every_task(tmp_path, capsys):
    write_tasks(tmp_path / "i.h5", ["a", "b"], [np.ones((4, 3)), np.ones((2, 3))],
                [np.array([1, 1, -1, -1]), np.array([1, 1])], description="two")
    code, out, _ = cli(capsys, "data", "info", tmp_path / "i.h5")
    assert code == 0
    assert out.splitlines() == [
        f"{tmp_path / 'i.h5'}: two",
        " tasks   dims     total     max     min  pos ratio",
        "     2      3         6       4       2      0.750",
        "",
        "  task  name                            samples pos ratio",
        "     0  a                                     4    0.500",
        "     1  b                                     2    1.000",
    ]


def test_arrays_declared_larger_than_memory_are_refused_before_reading(tmp_path, monkeypatch):
    path = tmp_path / "huge.h5"
    raw_v2(path)
    with h5py.File(path, "r+") as f:                # 2^31 offsets, compressed to nothing
        del f["offsets"]
        f.create_dataset("offsets", shape=(2 ** 31,), dtype=np.int64, chunks=(2 ** 20,),
                         compression="gzip")
    monkeypatch.setattr(footprint, "available_memory", lambda: 2 ** 30)
    with pytest.raises(DataError) as err:
        read_meta(path)
    assert "/offsets would need 16.0 GiB, more than half the 1.0 GiB of memory available" in one_line(err.value)


# --------------------------------------------------------- hostile version 2 files (hypothesis)
small = st.integers(-3, 20)


@FAST
@given(X=st.lists(st.lists(values, min_size=1, max_size=3), min_size=0, max_size=6),
       y=st.lists(values, min_size=0, max_size=6),
       offsets=st.lists(small, min_size=0, max_size=5),
       name_offsets=st.lists(small, min_size=0, max_size=5), name=names,
       floats=st.booleans())
def test_hostile_version_2_files(tmp_path, X, y, offsets, name_offsets, name, floats):
    """Any /X, /y, /offsets and names: read_meta and load_block give the project's error or
    valid streams."""
    from omtl_mpi.data import load_block
    path = tmp_path / "h2.h5"
    with h5py.File(path, "w") as f:
        f.attrs["format_version"] = 2
        width = {len(r) for r in X}
        f["X"] = np.array(X, dtype=float) if len(width) == 1 else np.zeros((0,))
        f["y"] = np.array(y, dtype=float)
        f["offsets"] = np.array(offsets, dtype=float if floats else np.int64)
        f["names"] = np.frombuffer(name.encode(), dtype=np.uint8)
        f["name_offsets"] = np.array(name_offsets, dtype=np.int64)
    try:
        meta = read_meta(path)
        got = load_block(meta, 0, meta.n_tasks)
        assert len(got.y) == int(meta.offsets[-1]) and set(got.y.tolist()) <= {-1, 1}
    except UserError as exc:
        one_line_errors(exc)
