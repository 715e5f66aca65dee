"""The compiled steps (--kernel numba) against the numpy reference, and in-process against MPI.

The kernels compute the reference's formulas in the same order but group some sums
differently, so the two agree to rounding (1e-10 here), not to the bit; one kernel in one
process and under mpiexec agree as tightly as the numpy path does (tests/conftest.py).
"""
import json

import numpy as np
import pytest

from conftest import assert_in_process_equals_mpiexec, omtl
from omtl_mpi import fast
from omtl_mpi.algorithms import REGISTRY, AdmmParams
from omtl_mpi.algorithms.admm import Consensus, TaskBlock
from omtl_mpi.config import AUTO_KERNEL_ROUNDS
from omtl_mpi.fast import choose_kernel, kernels
from omtl_mpi.fast.steps import accelerate
from omtl_mpi.algorithms.relationship import Relationship, consensus_matrix, update_omega
from omtl_mpi.errors import ConfigError
from omtl_mpi.runtime.checks import check_algorithm, simulate

pytestmark = pytest.mark.skipif(not kernels.available(), reason="numba is not installed (the 'fast' extra)")

def P(name, **kw):
    """Learner ``name``'s parameters with the paper's settings (the compiled steps' model)."""
    params = REGISTRY[name].params
    return params.paper(**kw) if hasattr(params, "paper") else params(**kw)


COMPILED = sorted(n for n in REGISTRY if fast.compilable(P(n)))


def compiled(piece):
    """``piece`` (a role, a TaskBlock or a Consensus) with its compiled steps."""
    accelerate(piece)
    return piece


def test_the_admm_learners_take_the_option():
    assert COMPILED == ["admm-single", "c-admm", "d-admm", "pmsc-log"]


@pytest.mark.parametrize("name", COMPILED)
def test_generic_checks_with_the_kernel(name, unequal_streams):
    """Seeding, inputs untouched, a state round trip bit for bit, mini-batches."""
    check_algorithm(name, *unequal_streams, params=P(name), kernel="numba")


# Whole runs of the compiled and the numpy path agree to rounding only where the iteration does
# not amplify rounding: early on, Omega is the square root of a nearly singular V^T V, and on
# the 300-round streams a one-ulp change of a message moves numpy's own final W by about 1e-4
# (docs/DESIGN.md, "Compiled steps"). So the kernels are checked round by round, each round
# started from the reference's state (test_lockstep_*), and whole runs are compared where
# rounding is not amplified: without Omega updates, with lambda4 = 0, the paper variant, tasks
# learned alone, and D-ADMM on a ring (measured: at most 1e-11 apart).
WHOLE_RUNS = [
    ("c-admm", {"relationship": False}), ("c-admm", {"lambda4": 0.0}),
    ("c-admm", {"variant": "paper"}), ("c-admm", {"variant": "paper", "loss": "logistic"}),
    ("d-admm", {}), ("d-admm", {"variant": "paper"}), ("admm-single", {}), ("pmsc-log", {}),
]


@pytest.mark.parametrize("name,kw", WHOLE_RUNS,
                         ids=[f"{n}-{'-'.join(map(str, kw.values())) or 'default'}" for n, kw in WHOLE_RUNS])
@pytest.mark.parametrize("batch", [1, 3])
def test_whole_runs_agree(name, kw, batch, unequal_streams):
    """Same predictions, and every final variable to 1e-10."""
    preds_n, rows_n = simulate(name, *unequal_streams, params=P(name, **kw), kernel="numpy", batch=batch)
    preds_c, rows_c = simulate(name, *unequal_streams, params=P(name, **kw), kernel="numba", batch=batch)
    for k, (a, b) in enumerate(zip(preds_n, preds_c)):
        np.testing.assert_array_equal(a, b, err_msg=f"task {k}")
    assert rows_n.keys() == rows_c.keys()
    for key in rows_n:
        assert np.abs(rows_c[key]).max() > 1e-3, key        # it learned something
        np.testing.assert_allclose(rows_c[key], rows_n[key], rtol=0, atol=1e-10, err_msg=key)


def close(a, b, what):
    """Equal to 1e-12 relative to the array's largest entry (the squared hinge diverges)."""
    a, b = np.asarray(a), np.asarray(b)
    scale = max(float(np.abs(b).max(initial=0.0)), 1.0)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * scale, err_msg=what)


LOCKSTEP = [{}, {"loss": "perceptron"}, {"loss": "logistic"}, {"loss": "squared-hinge"},
            {"omega_every": 3}, {"lambda4": 0.0}, {"variant": "paper"}]


@pytest.mark.parametrize("kw", LOCKSTEP, ids=["-".join(map(str, kw.values())) or "default" for kw in LOCKSTEP])
@pytest.mark.parametrize("workers,batch", [(1, 1), (5, 1), (2, 3)])
def test_lockstep_cadmm(kw, workers, batch, unequal_streams):
    """Every round of C-ADMM from the same state: predictions, messages, replies (through the
    consensus matrix), every worker variable and Omega agree with the numpy path."""
    from omtl_mpi.algorithms.cadmm import CAdmmServer, CAdmmWorker
    from omtl_mpi.data.rounds import RoundBatches
    from omtl_mpi.runtime.layout import task_blocks
    X, y = unequal_streams
    K, d, T = len(X), X[0].shape[1], 300 // batch
    blocks = task_blocks(K, workers)
    sides = []
    for kernel in ("numpy", "numba"):
        p = P("c-admm", **kw).resolved(T)
        roles = ([CAdmmWorker(p, a, b, d, K) for a, b in blocks], CAdmmServer(p, K, d, blocks))
        if kernel == "numba":
            for role in [*roles[0], roles[1]]:
                accelerate(role)
        sides.append(roles)
    (ref_w, ref_s), (fast_w, fast_s) = sides
    data = [RoundBatches(X[a:b], y[a:b], batch, T, d) for a, b in blocks]
    for t in range(T):
        for rw, fw in zip(ref_w, fast_w):
            fw.load_state(rw.state())
        fast_s.load_state(ref_s.state())
        ups = []
        for rw, fw, s in zip(ref_w, fast_w, data):
            pr, mr = rw.up(s.X[t], s.y_float[t], s.inv_count[t])
            pf, mf = fw.up(s.X[t], s.y_float[t], s.inv_count[t])
            np.testing.assert_array_equal(pf, pr, err_msg=f"round {t} predictions")
            close(mf, mr, f"round {t} message")
            ups.append(mr.copy())
        up = np.concatenate(ups)
        reply_r, reply_f = ref_s.step(up.copy()).copy(), fast_s.step(up.copy()).copy()
        close(reply_f, reply_r, f"round {t} reply")
        offset = 0
        for (a, b), rw, fw in zip(blocks, ref_w, fast_w):
            n = (b - a + 1) * d
            rw.down(reply_r[offset: offset + n])
            fw.down(reply_r[offset: offset + n].copy())
            offset += n
            for key, value in rw.state().items():
                close(fw.state()[key], value, f"round {t} worker {key}")
        ref_s.after_reply()
        fast_s.after_reply()
        # Omega is the square root of V^T V: where V is nearly rank-deficient (the first rounds)
        # an eigenvalue at rounding level becomes one at the square root of rounding level, so
        # two correct eigensolvers agree to about 1e-8 there (test_relationship_update_at_every_scale
        # checks full-rank V to 1e-12). The next round's reply checks the consensus matrix.
        np.testing.assert_allclose(fast_s.consensus.omega, ref_s.consensus.omega, rtol=0, atol=1e-7,
                                   err_msg=f"round {t} omega")


def test_many_tasks_keep_blas_for_omega(unequal_streams):
    """Beyond kernels.MAX_TASKS the Omega update and M are numpy's (BLAS products); the rest
    of the round is still compiled, and the run agrees with numpy's."""
    X, y = unequal_streams
    X, y = X * 4, y * 4                                       # 20 tasks
    assert len(X) > kernels.MAX_TASKS
    cons = compiled(Consensus(AdmmParams.paper(eta=1.0), len(X), X[0].shape[1]))
    assert type(cons) is Consensus
    preds_n, rows_n = simulate("c-admm", X, y, params=P("c-admm", relationship=False), kernel="numpy")
    preds_c, rows_c = simulate("c-admm", X, y, params=P("c-admm", relationship=False), kernel="numba")
    for a, b in zip(preds_n, preds_c):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(rows_c["W"], rows_n["W"], rtol=0, atol=1e-10)


def test_consensus_step_reads_a_strided_block():
    """D-ADMM hands the (u, V) step a column block of its table."""
    rng = np.random.default_rng(3)
    table = rng.normal(size=(5, 2 * 8 + 1))
    ref, fast = consensus_pair()
    ref.V = rng.normal(size=(5, 8))
    fast.rel = ref.rel = update_omega(ref.V, 1e-8, ref.rel)
    ua, Va = (x.copy() for x in ref.step(table[:, :8]))
    ub, Vb = fast.step(table[:, :8])
    close(ub, ua, "u")
    close(Vb, Va, "V")


def test_dadmm_on_the_full_graph_predicts_as_cadmm_with_the_kernel(unequal_streams):
    """Spec equivalence 2 on the compiled path."""
    cen, _ = simulate("c-admm", *unequal_streams, params=P("c-admm"), kernel="numba")
    dec, _ = simulate("d-admm", *unequal_streams, params=P("d-admm"), kernel="numba", topology="full")
    for a, b in zip(cen, dec):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("algo,ranks,local", [("c-admm", 3, []), ("d-admm", 3, ["--nodes", "3"])])
def test_in_process_equals_mpiexec_with_the_kernel(algo, ranks, local, mpiexec, small_tasks, tmp_path):
    assert_in_process_equals_mpiexec(["--algo", algo, "--data", small_tasks, "--kernel", "numba", "--preset", "paper"],
                                     local, ranks, tmp_path)


# -- the pieces, on inputs that reach every branch -------------------------------------------

def block_pair(kb, d, loss, shared_u=True):
    p = AdmmParams.paper(loss=loss, eta=7.0)
    return TaskBlock(p, kb, d, shared_u=shared_u), compiled(TaskBlock(p, kb, d, shared_u=shared_u))


@pytest.mark.parametrize("loss", ["hinge", "perceptron", "logistic", "squared-hinge"])
@pytest.mark.parametrize("kb,B", [(1, 1), (4, 1), (3, 4)])
def test_worker_and_dual_steps(loss, kb, B):
    rng = np.random.default_rng(kb * 10 + B)
    d = 6
    ref, fast = block_pair(kb, d, loss, shared_u=kb != 4)
    for t in range(30):
        X = rng.normal(size=(B, kb, d))
        y = rng.choice([-1.0, 1.0], size=(B, kb))
        if B > 1:                                 # padding: a task whose stream has ended
            X[-1, 0], y[-1, 0] = 0.0, 0.0
        inv_count = 1.0 / np.maximum((y != 0).sum(axis=0), 1)
        pa, Ca = ref.predict_and_step(X, y, inv_count)
        pb, Cb = fast.predict_and_step(X.copy(), y.copy(), inv_count.copy())
        np.testing.assert_array_equal(pa, pb)
        np.testing.assert_allclose(Cb, Ca, rtol=0, atol=1e-12)
        u = rng.normal(size=d) if kb != 4 else rng.normal(size=(kb, d))
        V = rng.normal(size=(kb, d))
        ref.dual_step(u, V)
        fast.dual_step(u.copy(), V.copy())
        for key in ("W", "Z"):
            np.testing.assert_allclose(getattr(fast, key), getattr(ref, key), rtol=0, atol=1e-12)
        np.testing.assert_allclose(fast.w_step.R, ref.w_step.R, rtol=0, atol=1e-12)


def consensus_pair(d=8, **kw):
    """A numpy and a compiled Consensus for K = 5 tasks of d features (d >= K: V V^T of full
    rank, so that Omega is well-conditioned)."""
    p = AdmmParams.paper(eta=1.0, **kw)
    return Consensus(p, 5, d), compiled(Consensus(p, 5, d))


@pytest.mark.parametrize("scale", [1.0, 1e-100, 1e100, 1e200, 0.0])
def test_relationship_update_at_every_scale(scale):
    """Ordinary V, V whose Gram matrix under- or overflows, V = 0: the compiled update hands
    the last three to relationship.py's careful path and ends where it does."""
    rng = np.random.default_rng(0)
    V = rng.normal(size=(5, 8)) * scale
    for cons in consensus_pair():
        cons.V = V
        cons.rounds = 1
        cons.update_relationship()
        omega = cons.omega
        np.testing.assert_allclose(np.trace(omega), 1.0, rtol=1e-12)
        expected = update_omega(V, cons.p.omega_eps, Relationship.identity(5)).omega
        np.testing.assert_allclose(omega, expected, rtol=0, atol=1e-12)
        M = consensus_matrix(cons.rel, cons.p.a, cons.p.rho, cons.p.lambda2, cons.p.lambda4)
        np.testing.assert_allclose(cons._cached_operator(), M, rtol=0, atol=1e-12)


def test_non_finite_v_keeps_the_previous_omega():
    for cons in consensus_pair():
        before = cons.omega
        V = np.ones((5, 8))
        V[2, 1] = np.nan
        cons.V = V
        cons.rounds = 1
        cons.update_relationship()
        np.testing.assert_array_equal(cons.omega, before)


def test_cancelling_consensus_matrix_takes_the_stable_path():
    """lambda2 and a tiny against rho: M's denominator cancels; both paths build it in Omega's
    eigenvectors and agree."""
    rng = np.random.default_rng(1)
    ref, fast = consensus_pair(lambda1=1e-12, lambda3=0.0, lambda2=1e-12, lambda4=0.0, rho=1.0)
    p, rel = fast.p, fast.rel
    status = kernels.load().consensus_matrix(rel.evals, rel.evecs, p.a, p.rho, p.lambda2, p.lambda4,
                                             np.empty((6, 5)))
    assert status == kernels.load().STABLE
    C = rng.normal(size=(5, 8))
    for cons in (ref, fast):
        cons.rounds = 1
        cons.V = rng.normal(size=(5, 8))
    fast.V = ref.V
    for cons in (ref, fast):
        cons.update_relationship()
    M = ref._cached_operator()
    np.testing.assert_allclose(fast._cached_operator(), M, rtol=1e-9, atol=0)
    ua, Va = ref.step(C)
    ub, Vb = fast.step(C.copy())
    np.testing.assert_allclose(ub, ua, rtol=1e-8)
    np.testing.assert_allclose(Vb, Va, rtol=1e-8)


def test_merge_keeps_the_freshest_row_and_our_own_on_a_tie():
    from omtl_mpi.algorithms.dadmm import DAdmmNode
    rng = np.random.default_rng(2)
    nodes = [DAdmmNode(AdmmParams.paper(eta=1.0), 4, 3, 1, 2, n_neighbours=2),
             compiled(DAdmmNode(AdmmParams.paper(eta=1.0), 4, 3, 1, 2, n_neighbours=2))]
    slots = rng.normal(size=nodes[0].slots.shape)
    slots[:, :, -1] = [[5, 3, 7, 2], [5, 4, 6, 2], [1, 4, 9, 2]]      # stamps: tie, tie, 2, own
    for node in nodes:
        node.slots[...] = slots
        node.round = 9
    a, b = (node.merge(node.inbox) for node in nodes)
    assert a == b == 9 - (5 + 4 + 9 + 2) / 4
    np.testing.assert_array_equal(nodes[0].table, nodes[1].table)
    np.testing.assert_array_equal(nodes[1].table[0], slots[0, 0])     # own copy wins the tie
    np.testing.assert_array_equal(nodes[1].table[1], slots[1, 1])     # first neighbour on a tie
    np.testing.assert_array_equal(nodes[1].table[2], slots[2, 2])


# -- choosing the kernel -----------------------------------------------------------------------

def test_auto_compiles_long_runs_of_the_euclid_step_only():
    euclid = AdmmParams.paper()
    assert choose_kernel("auto", euclid, AUTO_KERNEL_ROUNDS - 1, 1.0) == "numpy"
    assert choose_kernel("auto", euclid, AUTO_KERNEL_ROUNDS, 1.0) == "numba"
    # 6 ranks on 2 CPUs: every process pays the load on a shared core
    assert choose_kernel("auto", euclid, 2 * AUTO_KERNEL_ROUNDS, 3.0) == "numpy"
    assert choose_kernel("auto", euclid, 3 * AUTO_KERNEL_ROUNDS, 3.0) == "numba"
    assert choose_kernel("auto", euclid, AUTO_KERNEL_ROUNDS, 0.25) == "numba"
    assert choose_kernel("auto", AdmmParams.paper(w_step="arow"), 10 * AUTO_KERNEL_ROUNDS, 1.0) is None
    assert choose_kernel("auto", P("pa"), 10 * AUTO_KERNEL_ROUNDS, 1.0) is None     # nothing to compile
    assert choose_kernel("numpy", euclid, 10 * AUTO_KERNEL_ROUNDS, 1.0) == "numpy"
    assert choose_kernel("numba", euclid, 10, 1.0) == "numba"


def test_bad_kernel_choices_are_refused(monkeypatch):
    from omtl_mpi.config import RunConfig
    with pytest.raises(ConfigError, match="--kernel must be one of auto, numpy, numba"):
        RunConfig(kernel="cuda")
    with pytest.raises(ConfigError, match="compiles the ADMM learners with the euclid w-step, --no-experts and no --class-weight only"):
        fast.check_kernel("numba", AdmmParams.paper(w_step="adagrad"))
    with pytest.raises(ConfigError, match="compiles the ADMM learners with the euclid w-step, --no-experts and no --class-weight only"):
        fast.check_kernel("numba", P("arow"))
    monkeypatch.setattr(kernels, "available", lambda: False)
    with pytest.raises(ConfigError, match=r"needs numba: pip install 'omtl-mpi\[fast\]'"):
        fast.check_kernel("numba", AdmmParams.paper())
    assert choose_kernel("auto", AdmmParams.paper(), 10 * AUTO_KERNEL_ROUNDS, 1.0) == "numpy"


def test_command_line_reports_and_refuses():
    r = omtl("run", "--synth-samples", "300", "--preset", "paper", "--kernel", "numba", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kernel"] == "numba"
    r = omtl("run", "--synth-samples", "300", "--preset", "paper", "--json")
    assert json.loads(r.stdout)["kernel"] == "numpy"          # auto, short run
    r = omtl("run", "--synth-samples", "300", "--json")
    assert json.loads(r.stdout)["kernel"] is None              # the default has no compiled steps
    r = omtl("run", "--synth-samples", "300", "--kernel", "numba")
    assert r.returncode == 2 and "--kernel numba compiles the ADMM learners with the euclid" in r.stderr
    r = omtl("run", "--synth-samples", "300", "--preset", "paper", "--kernel", "numba", "--w-step", "arow")
    assert r.returncode == 2 and "--kernel numba compiles the ADMM learners with the euclid" in r.stderr
    r = omtl("run", "--algo", "pa", "--synth-samples", "300", "--kernel", "numba")
    assert r.returncode == 2 and "--kernel numba compiles the ADMM learners with the euclid" in r.stderr


def test_the_compiled_functions_are_what_runs(monkeypatch, unequal_streams):
    """The comparisons above would pass trivially if --kernel numba quietly ran numpy."""
    compiled = kernels.load()
    calls = {}
    for name in ("worker_step", "dual_step", "relationship_step", "consensus_matrix",
                 "apply_consensus", "merge_tables"):
        def counted(*args, _fn=getattr(compiled, name), _name=name):
            calls[_name] = calls.get(_name, 0) + 1
            return _fn(*args)
        monkeypatch.setattr(compiled, name, counted)
    simulate("c-admm", *unequal_streams, params=P("c-admm"), kernel="numba")
    simulate("d-admm", *unequal_streams, params=P("d-admm"), kernel="numba")
    assert calls["worker_step"] == calls["dual_step"] == 300 + 5 * 300   # one worker, 5 nodes
    # the server updates Omega after each of its 300 steps, a node before each step but the first
    assert calls["relationship_step"] == 300 + 5 * 299
    assert calls["apply_consensus"] == 300 + 5 * 300
    assert calls["merge_tables"] == 5 * 300
    assert calls["consensus_matrix"] == 1 + 5               # Omega = I / K, before the first step
    calls.clear()
    simulate("c-admm", *unequal_streams, params=P("c-admm"), kernel="numpy")
    assert calls == {}


def _probe(code):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_loading_the_kernels_leaves_scipy_linalg_unimported():
    # numba looks for scipy.linalg's BLAS and LAPACK through the package, which would cost a
    # rank more than numba itself; kernels.load lends it the two extension modules instead
    loaded = _probe("import sys, numpy as np\nfrom omtl_mpi.fast import kernels\n"
                    "k = kernels.load()\nM = np.empty((4, 3))\n"
                    "assert k.relationship_step(np.eye(3), 0.0, 1.0, 1.0, 1.0, 1.0, np.empty(3), "
                    "np.empty((3, 3)), M) == k.OK\n"
                    "print(' '.join(m for m in sys.modules if m.startswith('scipy.linalg')))\n"
                    "import scipy.linalg.cython_lapack\nprint('whole', scipy.linalg.eigh is not None)")
    assert loaded == ["whole", "True"]


def test_a_numpy_run_does_not_import_numba():
    out = _probe("import sys, runpy\n"
                 "sys.argv = ['omtl-mpi', 'run', '--synth-samples', '200', '--json']\n"
                 "try:\n    runpy.run_module('omtl_mpi', run_name='__main__')\n"
                 "except SystemExit:\n    pass\nprint('numba' in sys.modules)")
    assert out[-1] == "False"


def test_kernels_that_fail_to_load_are_one_line(monkeypatch):
    def broken():
        raise OSError("cache folder is read-only")
    monkeypatch.setattr(kernels, "load", broken)
    with pytest.raises(ConfigError, match=r"--kernel numba: the compiled steps did not load "
                                          r"\(OSError: cache folder is read-only\); use --kernel numpy"):
        fast.load_kernels()


# -- numba's cache kept fresh ---------------------------------------------------------------

def test_the_compiled_constants_are_relationships():
    """numba's cache checks _compiled.py alone, so it keeps its own copies of relationship.py's
    constants: they must agree."""
    from omtl_mpi.algorithms import relationship
    compiled = kernels.load()
    assert (compiled._SAFE_LOW, compiled._SAFE_HIGH) == (relationship._SAFE_LOW, relationship._SAFE_HIGH)
