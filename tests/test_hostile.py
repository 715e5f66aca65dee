"""Property-based hostile input: whatever bytes or values come in, the only exception that
escapes is the project's own one-line error (never a traceback from h5py, numpy or tomllib)."""
import math

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omtl_mpi.algorithms.admm import AdmmParams
from omtl_mpi.data import import_npz, load_tasks, read_meta
from omtl_mpi.errors import UserError
from omtl_mpi.topology import load_topology

FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def one_line_errors(exc: UserError):
    assert str(exc).strip() and all(line.strip() for line in str(exc).splitlines())


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


# any unicode but NUL (which HDF5 strings cannot hold, so no file could carry it)
names = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                min_size=0, max_size=12)
values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 3))


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


toml_text = st.one_of(
    st.text(max_size=200),
    st.builds(lambda n, e: f"nodes = {n}\nedges = {e}\n", st.integers(-2, 6),
              st.lists(st.lists(st.integers(-2, 7), min_size=0, max_size=3), max_size=8)),
    st.builds(lambda k, extra: f'kind = "{k}"\n{extra}', st.sampled_from(
        ["ring", "full", "star", "torus", "random-regular", "erdos-renyi", "watts-strogatz", "nope"]),
        st.sampled_from(["", "degree = 3", "p = 0.0", "k = 3", "beta = 2", "rows = 5", "seed = -1"])),
)


@FAST
@given(text=toml_text, n=st.integers(1, 7))
def test_hostile_topology_files(tmp_path, text, n):
    f = tmp_path / "t.toml"
    f.write_text(text, encoding="utf-8")
    try:
        topo = load_topology(str(f), n)
        assert topo.n_nodes == n and len(topo.components()) == 1
    except UserError as exc:
        one_line_errors(exc)


@FAST
@given(st.dictionaries(st.sampled_from(["rho", "eta", "lambda1", "lambda2", "lambda3", "lambda4",
                                        "omega_eps"]),
                       st.floats(allow_nan=True, allow_infinity=True), max_size=4),
       st.integers(-3, 3))
def test_hostile_hyper_parameters(params, every):
    try:
        p = AdmmParams(**params, omega_every=every)
        assert p.rho > 0 and p.lambda1 > 0 and p.lambda2 > 0 and p.omega_every >= 1
        assert all(math.isfinite(getattr(p, k)) for k in params)
    except UserError as exc:
        one_line_errors(exc)


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
