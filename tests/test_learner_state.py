"""A learner's state and files are checked before anything is loaded: counters in range and of
integer type, learner files carrying a SHA-256 digest that a changed byte breaks."""
import copy
import shutil

import h5py
import numpy as np
import pytest

import omtl_mpi
from omtl_mpi.checks import _same_state


def _learned(algo, K=3, d=2):
    m = omtl_mpi.learner(algo, K, d)
    rng = np.random.default_rng(0)
    for i in range(12):
        m.learn_one(rng.normal(size=d), 1 if i % 2 else -1, task=i % K)
    return m


def _edit(state, path, value):
    state = copy.deepcopy(state)
    node = state
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return state


@pytest.mark.parametrize("path, value", [
    (("state", "learner", "n_rounds"), 2 ** 64 - 1),
    (("state", "learner", "n_rounds"), np.int64(2 ** 63 - 1)),
    (("state", "learner", "n_seen"), np.full(3, 2 ** 63 - 1)),
    (("state", "learner", "n_rounds"), -1),
    (("state", "learner", "n_rounds"), 2 ** 70),
    (("state", "learner", "n_rounds"), 3.5),
    (("state", "learner", "n_rounds"), True),
    (("state", "learner", "n_seen"), np.array([2 ** 63 + 5, 0, 0], dtype=np.uint64)),
    (("state", "learner", "n_seen"), np.array([-1, 0, 0])),
])
def test_counters_out_of_range_are_refused_and_change_nothing(path, value):
    m = _learned("c-admm")
    state = m.state_dict()
    with pytest.raises(omtl_mpi.UserError, match="n_rounds|n_seen"):
        m.load_state_dict(_edit(state, path, value))
    assert _same_state(state["state"], m.state_dict()["state"]) is None


@pytest.mark.parametrize("value", [-3, 2 ** 63 - 1])
@pytest.mark.parametrize("algo, key", [("pooled", ("holder0", "round")), ("d-psgd", ("holder0", "round")),
                                       ("drom", ("holder0", "round")), ("drom", ("server", "steps"))])
def test_rounds_and_steps_of_a_learner_out_of_range_are_refused(algo, key, value):
    """A negative count, or one so large that the next round overflows int64."""
    m = _learned(algo)
    state = m.state_dict()
    bad = _edit(state, ("state", "roles") + key, np.int64(value))
    with pytest.raises(omtl_mpi.UserError, match=f"holds {value}, where a count"):
        omtl_mpi.learner(algo, 3, 2).load_state_dict(bad)


def test_a_fresh_empirical_bayes_state_with_its_unset_versions_loads():
    # the prior's version of a task never met is -1: a legitimate count floor
    m = omtl_mpi.learner("c-admm", 30, 2)
    m.learn_one([1.0, 0.5], 1, task=0)
    state = m.state_dict()
    assert (np.asarray(state["state"]["roles"]["holder0"]["bayes_version"]) == -1).any()
    omtl_mpi.learner("c-admm", 30, 2).load_state_dict(state)


def test_a_flipped_byte_in_a_saved_learner_is_found(tmp_path):
    m = _learned("arow")
    path = tmp_path / "m.h5"
    m.save(path)
    with h5py.File(path, "r") as f:
        offset = f["state/roles/holder0/W"].id.get_offset()
    for flip in (0, 3, 7):                                    # a low bit, a mantissa, a sign
        bad = tmp_path / f"flip{flip}.h5"
        shutil.copy(path, bad)
        with open(bad, "r+b") as f:
            f.seek(offset + flip)
            byte = f.read(1)[0]
            f.seek(offset + flip)
            f.write(bytes([byte ^ 0x01]))
        with pytest.raises(omtl_mpi.UserError, match="do not match its digest"):
            omtl_mpi.load(bad)
    assert (omtl_mpi.load(path).W_ == m.W_).all()


def test_changed_parameters_or_a_removed_digest_are_found(tmp_path):
    m = _learned("pa")
    path = tmp_path / "m.h5"
    m.save(path)
    changed = tmp_path / "changed.h5"
    shutil.copy(path, changed)
    with h5py.File(changed, "a") as f:
        f.attrs["params"] = f.attrs["params"].replace('"C": 1.0', '"C": 2.0')
    with pytest.raises(omtl_mpi.UserError, match="digest"):
        omtl_mpi.load(changed)
    removed = tmp_path / "removed.h5"
    shutil.copy(path, removed)
    with h5py.File(removed, "a") as f:
        del f.attrs["digest"]
    with pytest.raises(omtl_mpi.UserError, match="without a digest"):
        omtl_mpi.load(removed)


def test_an_instance_that_overflows_against_the_model_is_one_error():
    m = omtl_mpi.PA(1, 2, intercept=False, C=100.0)
    m.learn_one([0.1, -0.1], 1, task=0)            # w = (5, -5)
    with np.errstate(all="raise"):                 # no numpy warning reaches the caller
        with pytest.raises(omtl_mpi.UserError, match="decision value is NaN"):
            m.decision_one([1e308, 1e308], task=0)     # a 1e308 - a 1e308 overflows: inf - inf
        assert m.predict_one([1e308, -1e308], task=0) == 1     # inf: a sign, not an error


def test_api_errors_are_in_pythons_spelling():
    with pytest.raises(omtl_mpi.UserError) as info:
        omtl_mpi.learner("c-admm", 3, 2, eta=0.0)
    assert "--" not in str(info.value) and "eta" in str(info.value)
    with pytest.raises(omtl_mpi.UserError) as info:
        omtl_mpi.learner("c-admm", 3, 2, coordinates="nonzero", w_step="arow", arow_covariance="full")
    assert "--" not in str(info.value), str(info.value)


@pytest.mark.parametrize("index", [7, 3, -1])
def test_sparse_indices_outside_the_features_are_refused_never_learned(index):
    import scipy.sparse as sp
    m = omtl_mpi.learner("arow", 2, 3)
    before = m.state_dict()["state"]
    row = sp.csr_matrix(([5.0], [index], [0, 1]), shape=(1, 3))
    with pytest.raises(omtl_mpi.UserError, match="indices do not fit"):
        m.learn_one(row, 1, task=0)
    with pytest.raises(omtl_mpi.UserError, match="indices do not fit"):
        m.partial_fit(sp.vstack([row, row]) if index >= 0 else row, [1] * (2 if index >= 0 else 1),
                      tasks=[0, 1] if index >= 0 else [0])
    with pytest.raises(omtl_mpi.UserError, match="indices do not fit"):
        m.predict_one(row, task=0)
    assert _same_state(before, m.state_dict()["state"]) is None


def test_a_callers_sparse_matrix_is_never_changed():
    import scipy.sparse as sp
    X = sp.csr_matrix((np.array([1.0, 0.0, 2.0]), np.array([0, 2, 1]), np.array([0, 2, 3])),
                      shape=(2, 3))
    kept = (X.data.copy(), X.indices.copy(), X.indptr.copy())
    m = omtl_mpi.learner("arow", 2, 3)
    m.partial_fit(X, [1, -1], tasks=[0, 1])
    m.learn_one(X[0], 1, task=0)
    assert all((a == b).all() for a, b in zip(kept, (X.data, X.indices, X.indptr)))


def test_what_the_second_hunt_found_in_the_api_is_one_error(tmp_path):
    """Each of these reached the caller as a raw exception, a warning or a model with NaN in it."""
    import copy as copying
    import warnings
    import scipy.sparse as sp
    m = omtl_mpi.learner("arow", 1, 3)
    with pytest.raises(omtl_mpi.UserError, match="not text that UTF-8 can write"):
        m.learn_one({"\ud800": 1.0}, 1, task=0)
    with pytest.raises(omtl_mpi.UserError, match="not text that UTF-8 can write"):
        omtl_mpi.hash_texts(["\ud800"], 16)
    x = sp.dia_matrix(np.ones((1, 3))).astype(np.float16)          # any format, any dtype
    m.learn_one(x, 1, task=0)
    assert m.decision_function(x, tasks=[0]).shape == (1,)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                             # no overflow warning
        with pytest.raises(omtl_mpi.UserError, match="NaN or inf"):
            m.predict_one(np.array([np.longdouble("1e4000"), 1, 2]), task=0)
    r = omtl_mpi.run_streams([np.ones((3, 2))], [np.array([1, -1, 1])])
    for save in (r.save, lambda p: omtl_mpi.run_streams([np.ones((3, 2))], [np.array([1, -1, 1])], out=p),
                 r.learner.save):
        with pytest.raises(omtl_mpi.UserError, match="a file name of 253 bytes"):
            save(tmp_path / ("a" * 250 + ".h5"))
    assert not list(tmp_path.iterdir())
    for algo in ("c-admm", "d-admm"):           # the empirical-Bayes prior went NaN, accepted
        m = omtl_mpi.learner(algo, 3, 1)
        with pytest.raises(omtl_mpi.UserError, match="non-finite"):
            m.learn_one([-1e154], -1, task=0)
        copying.deepcopy(m).learn_one([1.0], 1, task=0)
