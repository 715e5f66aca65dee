"""The adaptive w-steps (docs/ALGORITHMS.md section 2.1) and the independent AdaGrad and AROW
learners.

Each step is checked against its definition as a Bregman-proximal step, solved directly, and
every learner that has a w-step passes the generic checks and the in-process vs MPI
equivalence with each of them.
"""
import numpy as np
import pytest

from conftest import assert_in_process_equals_mpiexec, omtl_forked as omtl, write_declared_only
from omtl_mpi.algorithms.admm import GIVEN, AdmmParams, TaskBlock
from omtl_mpi.algorithms.independent import ArowParams
from omtl_mpi.algorithms.losses import gradient_coef, predict
from omtl_mpi.algorithms import wsteps
from omtl_mpi.algorithms.wsteps import inverse_rank_one, settle_r
from omtl_mpi.data import generate
import omtl_mpi
from support.drive import simulate

W_STEPS = ("adagrad", "arow")


def random_block(rng, p, kb=3, d=6):
    """A block of tasks that have learned already, whose task parts v_k are given by a
    consensus step (here: drawn at random)."""
    block = TaskBlock(p, kb, d, mode=GIVEN)
    W, Z = rng.normal(size=(kb, d)), rng.normal(size=(kb, d))
    block.load_state({**block.state(), "W": W, "Z": Z, "C": Z + p.rho * W,
                      "u": rng.normal(size=d), "V": rng.normal(size=(kb, d)),
                      "started": np.ones(kb, dtype=bool)})
    return block


def rounds(block, rng, n, B=1):
    """Drive a block for n rounds; yield what each w-step saw and the W before and after."""
    kb, d = block.W.shape
    for _ in range(n):
        X = rng.normal(size=(B, kb, d))
        y = rng.choice([-1.0, 1.0], size=(B, kb))
        W0, target, Z = block.W.copy(), block.u + block.V, block.Z.copy()
        margins = np.einsum("kd,bkd->bk", W0, X)
        coef = gradient_coef(block.p.loss, y, margins, predict(margins))
        G = np.einsum("bk,bkd->kd", coef, X) / B
        block.predict_and_step(X, y, np.full(kb, 1.0 / B))
        yield X, coef, G, W0, target, Z
        block.dual_step(rng.normal(size=d), rng.normal(size=(kb, d)))


@pytest.mark.parametrize("B", [1, 3])
def test_adagrad_step_is_the_closed_form_with_its_diagonal_metric(B):
    rng = np.random.default_rng(0)
    p = AdmmParams(w_step="adagrad", eta=0.7, delta=0.5, experts=False)
    block = random_block(rng, p)
    S = np.zeros_like(block.W)
    for X, coef, G, W0, target, Z in rounds(block, rng, 20, B):
        S += G * G
        D = np.sqrt(p.delta + S)
        expected = (p.eta * D * W0 + p.rho * target - G - Z) / (p.eta * D + p.rho)
        np.testing.assert_allclose(block.W, expected, rtol=1e-13, atol=1e-13)
        # and it is the minimiser: the gradient of the w-step's objective vanishes there
        grad = G + Z + p.rho * (block.W - target) + p.eta * D * (block.W - W0)
        np.testing.assert_allclose(grad, 0, atol=1e-12)


@pytest.mark.parametrize("loss", ["hinge", "squared-hinge", "logistic"])
@pytest.mark.parametrize("B", [1, 2])
@pytest.mark.parametrize("kb", [3, wsteps.TASKS_LAST_FROM])
def test_arow_step_solves_the_system_with_its_full_precision(loss, B, kb):
    """The stored inverse, kept by rank-one updates, equals a fresh solve with
    D_t = r I + sum over margin errors of x x^T (each instance weighted 1/B): with the
    matrices task-first (a few tasks) and tasks-last (many), and the state task-first."""
    rng = np.random.default_rng(1)
    p = AdmmParams(w_step="arow", eta=0.8, arow_r=2.0, loss=loss, experts=False)
    block = random_block(rng, p, kb=kb)
    kb, d = block.W.shape
    D = np.broadcast_to(p.arow_r * np.eye(d), (kb, d, d)).copy()
    for X, coef, G, W0, target, Z in rounds(block, rng, 30, B):
        for b, k in zip(*np.nonzero(coef)):
            D[k] += np.outer(X[b, k], X[b, k]) / B
        for k in range(kb):
            A = p.eta * D[k] + p.rho * np.eye(d)
            expected = np.linalg.solve(A, p.eta * D[k] @ W0[k] + p.rho * target[k] - G[k] - Z[k])
            np.testing.assert_allclose(block.W[k], expected, rtol=1e-9, atol=1e-9)
    assert (coef != 0).any()
    M = block.w_step.state()["M"]
    np.testing.assert_allclose(M, np.linalg.inv(p.eta * D + p.rho * np.eye(d)), rtol=1e-9, atol=1e-9)


def test_every_w_step_starts_as_the_euclidean_one():
    """D_0 = I (arow: r I, here with r = 1): with no loss gradient yet, the three steps are the
    same step."""
    out = []
    for w_step in ("euclid", "adagrad", "arow"):
        block = random_block(np.random.default_rng(3),
                             AdmmParams(w_step=w_step, eta=1.5, arow_r=1.0, experts=False))
        X = np.zeros((1, 3, 6))
        block.predict_and_step(X, np.zeros((1, 3)), np.ones(3))
        out.append(block.W)
    np.testing.assert_allclose(out[1], out[0], rtol=1e-15)
    np.testing.assert_allclose(out[2], out[0], rtol=1e-14)


def test_inverse_rank_one_updates_in_place():
    rng = np.random.default_rng(4)
    A = rng.normal(size=(5, 5))
    A = A @ A.T + np.eye(5)
    stack = np.stack([np.linalg.inv(A)] * 2)
    x = rng.normal(size=5)
    mx, v = inverse_rank_one(stack[1], x, 0.3)           # a view into the stack, as in ArowStep
    np.testing.assert_allclose(stack[1], np.linalg.inv(A + 0.3 * np.outer(x, x)), rtol=1e-12)
    np.testing.assert_array_equal(stack[0], np.linalg.inv(A))
    np.testing.assert_allclose(mx, np.linalg.solve(A, x), rtol=1e-12)
    assert v == pytest.approx(x @ np.linalg.solve(A, x))


def reference_arow(x, y, r):
    """AROW as printed in Crammer, Kulesza & Dredze (2009), one instance at a time."""
    d = x.shape[1]
    mu, sigma, preds = np.zeros(d), np.eye(d), []
    for xi, yi in zip(x, y.astype(float)):
        m = mu @ xi
        preds.append(1 if m >= 0 else -1)
        if yi * m < 1:
            sx = sigma @ xi
            beta = 1.0 / (xi @ sx + r)
            mu = mu + (1 - yi * m) * beta * yi * sx
            sigma = sigma - beta * np.outer(sx, sx)
    return np.array(preds), mu


def test_independent_arow_is_arow():
    _, X, y = generate(tasks=3, samples=400, seed=5)
    X = [x / np.linalg.norm(x, axis=1, keepdims=True) for x in X]
    preds, rows = simulate("arow", X, y, params=ArowParams(arow_r=0.5))
    for k in range(3):
        ref_preds, ref_mu = reference_arow(X[k], y[k], 0.5)
        np.testing.assert_array_equal(preds[k], ref_preds)
        np.testing.assert_allclose(rows["W"][k], ref_mu, rtol=1e-10, atol=1e-12)


def test_independent_adagrad_is_adagrad():
    from omtl_mpi.algorithms.independent import AdagradParams
    _, X, y = generate(tasks=2, samples=300, seed=6)
    p = AdagradParams(gamma0=0.3, delta=0.2)
    preds, rows = simulate("adagrad", X, y, params=p)
    for k in range(2):
        w, S = np.zeros(X[k].shape[1]), np.zeros(X[k].shape[1])
        for t, (xi, yi) in enumerate(zip(X[k], y[k].astype(float))):
            assert preds[k][t] == (1 if w @ xi >= 0 else -1)
            g = -yi * xi if yi * (w @ xi) < 1 else 0 * xi
            S += g * g
            w = w - p.gamma0 * g / np.sqrt(p.delta + S)
        np.testing.assert_allclose(rows["W"][k], w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("w_step", W_STEPS)
@pytest.mark.parametrize("name", ["c-admm", "d-admm", "admm-single", "pmsc-log"])
def test_generic_checks_with_every_w_step(name, w_step):
    params = {"w_step": w_step}                             # pmsc-log fixes its own loss
    if name != "pmsc-log" and w_step == "arow":
        params["loss"] = "squared-hinge"
    omtl_mpi.check_learner(omtl_mpi.learner(name, 4, 5, rounds=40, **params), mpi=False)


@pytest.mark.mpi
@pytest.mark.parametrize("name,ranks,extra", [("c-admm", 3, []), ("d-admm", 3, ["--nodes", "3"])])
def test_w_steps_in_process_equal_mpiexec(name, ranks, extra, mpiexec, small_tasks, tmp_path):
    """AdaGrad here; AROW is the default w-step, whose run (these options and ranks) is
    tests/test_algorithm_checks.py::test_in_process_equals_mpiexec's."""
    assert AdmmParams().w_step == "arow"
    assert_in_process_equals_mpiexec(["--algo", name, "--data", small_tasks, "--batch", "2",
                                      "--w-step", "adagrad"], extra, ranks, tmp_path)


def test_w_step_changes_what_is_learned():
    """Not a renamed euclid: on the synthetic family the adaptive steps predict differently."""
    _, X, y = generate(tasks=3, samples=500, seed=7)
    preds = {w: simulate("c-admm", X, y, params=AdmmParams(w_step=w))[0] for w in ("euclid", "adagrad", "arow")}
    assert not np.array_equal(preds["euclid"][0], preds["adagrad"][0])
    assert not np.array_equal(preds["euclid"][0], preds["arow"][0])


@pytest.mark.parametrize("args,message", [
    (["--w-step", "newton"], "Invalid value for '--w-step'"),
    (["--w-step", "arow", "--arow-r", "0"], "--arow-r must be > 0"),
    (["--w-step", "adagrad", "--delta", "-1"], "--delta must be > 0"),
    (["--algo", "pa", "--w-step", "arow"], "--w-step does not apply to pa"),
    (["--algo", "arow", "--arow-r", "nan"], "--arow-r must be a finite number > 0"),
    (["--algo", "adagrad", "--gamma0", "0"], "--gamma0 must be a finite number > 0"),
])
def test_bad_w_step_options_are_one_clear_line(args, message):
    r = omtl("run", "--synth-samples", "20", *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_arow_refuses_a_full_precision_matrix_out_of_proportion(tmp_path):
    """Asked for, the full covariance at d = 400,001 is refused before anything is read (auto
    takes the diagonal there: tests/test_sparse.py)."""
    path = write_declared_only(tmp_path / "wide.h5", rows=3, dim=400_000)
    for args in (["--w-step", "arow"], ["--algo", "arow"]):
        r = omtl("run", "--data", path, *args, "--arow-covariance", "full")
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert ("--arow-covariance full at d = 400001 weights (an intercept counts one): a 400,001 x 400,001 matrix per task "
                "(1,220,709 MiB)") in r.stderr and "use --arow-covariance diagonal" in r.stderr


def test_arow_w_step_without_consensus_is_arow():
    """Squared hinge, eta = 1 and rho -> 0 give AROW's own update (docs/ALGORITHMS.md section
    2.1)."""
    from omtl_mpi.algorithms.independent import SingleParams
    _, X, y = generate(tasks=2, samples=300, seed=8)
    X = [x / np.linalg.norm(x, axis=1, keepdims=True) for x in X]
    p = SingleParams(w_step="arow", loss="squared-hinge", eta=1.0, arow_r=0.5, rho=1e-12)
    preds, rows = simulate("admm-single", X, y, params=p)
    for k in range(2):
        ref_preds, ref_mu = reference_arow(X[k], y[k], 0.5)
        np.testing.assert_array_equal(preds[k], ref_preds)
        np.testing.assert_allclose(rows["W"][k], ref_mu, rtol=1e-6, atol=1e-8)


def test_auto_r_is_set_from_each_tasks_first_nonzero_instances():
    """settle_r: r = scale times the mean squared norm of the task's first mini-batch with a
    nonzero instance; a task whose instances are all zero so far waits, and a known r stays."""
    r = np.array([0.0, 0.0, 3.0])
    X = np.zeros((2, 3, 2))
    X[0, 0] = [3.0, 4.0]                     # task 0: one nonzero instance of |x|^2 = 25
    X[:, 2] = 1.0                            # task 2 already has its r
    assert settle_r(r, X, 0.2).tolist() == [True, False, False]
    assert r.tolist() == [5.0, 0.0, 3.0]
    X[:, 1] = [[1.0, 1.0], [2.0, 0.0]]       # task 1 at last: mean of 2 and 4
    settle_r(r, X, 0.5)
    assert r.tolist() == [5.0, 1.5, 3.0]


def test_auto_r_waits_without_moving_w():
    """Until a task has seen a nonzero instance, the arow w-step with r auto leaves its w put;
    then its metric starts at (eta r + rho)^-1 I with its own r."""
    p = AdmmParams(w_step="arow", eta=1.0, experts=False)
    block = random_block(np.random.default_rng(6), p)
    W0 = block.W.copy()
    block.predict_and_step(np.zeros((1, 3, 6)), np.zeros((1, 3)), np.ones(3))
    np.testing.assert_array_equal(block.W, W0)
    X = np.zeros((1, 3, 6))
    X[0, 1, 0] = 2.0
    block.predict_and_step(X, np.array([[0.0, 1.0, 0.0]]), np.ones(3))
    assert block.w_step.r.tolist() == [0.0, 0.2 * 4.0, 0.0]
    assert not np.array_equal(block.W[1], W0[1])
    np.testing.assert_array_equal(block.W[[0, 2]], W0[[0, 2]])


@pytest.mark.parametrize("patched", ["AROW_W_STEP_R_PER_MEAN_SQ_NORM",
                                     "AROW_DIAGONAL_W_STEP_R_PER_MEAN_SQ_NORM"])
def test_auto_r_each_form_takes_its_own_factor(monkeypatch, patched):
    """The arow w-step's auto r is its form's factor (full 0.2, diagonal 1.0) times the task's
    squared norm: changing one form's factor moves that form's r alone."""
    from omtl_mpi.algorithms import wsteps
    factors = {wsteps.ArowStep: 0.2, wsteps.ArowDiagStep: 1.0}
    monkeypatch.setattr(wsteps, patched, 0.75)
    factors[wsteps.ArowDiagStep if "DIAGONAL" in patched else wsteps.ArowStep] = 0.75
    X = np.zeros((1, 2, 3))
    X[0, 0] = [1.0, 2.0, 2.0]
    for form, factor in factors.items():
        step = form(AdmmParams(w_step="arow", eta=1.0), 2, 3)
        step.step(np.zeros((2, 3)), np.zeros((2, 3)), X, np.zeros((1, 2)), np.ones(2),
                  np.zeros((2, 3)), slice(None))
        assert step.r.tolist() == [factor * 9.0, 0.0], form


@pytest.mark.parametrize("algo", ["arow", "admm-single"])
def test_auto_r_makes_arow_scale_free(algo):
    """With r auto, scaling every feature by s = 8 (exact in floating point) changes nothing
    but the models' scale, 1/s: AROW alone, and the arow w-step without consensus terms."""
    from omtl_mpi.algorithms.independent import SingleParams
    _, X, y = generate(tasks=2, samples=200, seed=9)
    params = (ArowParams() if algo == "arow"
              else SingleParams(w_step="arow", loss="squared-hinge", rho=1e-300))
    preds, rows = simulate(algo, X, y, params=params)
    preds8, rows8 = simulate(algo, [8.0 * x for x in X], y, params=params)
    for k in range(2):
        np.testing.assert_array_equal(preds8[k], preds[k])
    np.testing.assert_allclose(8.0 * rows8["W"], rows["W"], rtol=1e-9 if algo == "arow" else 1e-6)


def test_auto_r_arow_waits_for_a_nonzero_instance():
    """Single-task AROW with r auto, a task whose first instances are all zero (no intercept):
    nothing is learned from them, nothing turns NaN, and r comes from the first nonzero one."""
    from omtl_mpi.algorithms.independent import ArowNode
    node = ArowNode(ArowParams(), 2, 3, 0, 2)
    X = np.zeros((1, 2, 3))
    X[0, 1] = [1.0, 2.0, 2.0]
    node.local_step(X, np.ones((1, 2)), np.ones(2))
    assert node.r.tolist() == [0.0, 0.5 * 9.0] and np.isfinite(node.Sigma).all()
    assert not node.W[0].any() and node.W[1].any()
    X[0, 0] = [0.0, 4.0, 0.0]
    node.local_step(X, -np.ones((1, 2)), np.ones(2))
    assert node.r.tolist() == [0.5 * 16.0, 0.5 * 9.0] and node.W[0].any()


def test_an_older_checkpoint_without_r_resumes_where_its_state_means_the_same():
    """Checkpoints written before r was kept per task: the arow w-step's M means the same only
    at r = 1, AROW's Sigma at any fixed r; otherwise one clear error, never a KeyError."""
    from omtl_mpi.algorithms.independent import ArowNode
    from omtl_mpi.errors import UserError
    block = random_block(np.random.default_rng(7), AdmmParams(w_step="arow", eta=1.0, arow_r=1.0))
    state = {k: v for k, v in block.w_step.state().items() if k != "r"}
    block.w_step.load_state(state)
    assert block.w_step.r.tolist() == [1.0] * 3
    for params in (AdmmParams(w_step="arow", eta=1.0, arow_r=2.0), AdmmParams(w_step="arow", eta=1.0)):
        with pytest.raises(UserError, match="older omtl-mpi"):
            random_block(np.random.default_rng(7), params).w_step.load_state(state)
    node = ArowNode(ArowParams(arow_r=0.5), 2, 3, 0, 2)
    old = {k: v for k, v in node.state().items() if k != "r"}
    node.load_state(old)
    assert node.r.tolist() == [0.5, 0.5]
    with pytest.raises(UserError, match="older omtl-mpi"):
        ArowNode(ArowParams(), 2, 3, 0, 2).load_state(old)


def test_auto_can_be_typed_and_means_the_default():
    """`--arow-r auto` and `--eta auto` (how --help shows their defaults) are the defaults;
    another word is one clear line."""
    import json
    from omtl_mpi.options import run_config
    runs = [omtl("run", "--synth-samples", "300", "--json", *extra) for extra in
            ([], ["--arow-r", "auto", "--eta", "auto"], ["--arow-r", "1"])]
    errors = [json.loads(r.stdout)["per_task_error"] for r in runs]
    assert errors[1] == errors[0] != errors[2]
    assert run_config({"arow_r": "auto", "eta": "auto"}).params == run_config({}).params
    r = omtl("run", "--synth-samples", "20", "--arow-r", "often")
    assert r.returncode == 2 and "'often' is neither a number nor 'auto'" in r.stderr


def test_arow_matrices_follow_the_rounds_layout():
    """A block of many tasks holds its arow matrices tasks-last for a round of every task and
    task-first for a round of some (the layout switched by a transpose): the same steps as a
    block that keeps them task-first throughout."""
    rng = np.random.default_rng(4)
    p = AdmmParams(w_step="arow", eta=0.8, arow_r=2.0, experts=False)
    kb, d = wsteps.TASKS_LAST_FROM, 5
    a = random_block(rng, p, kb=kb, d=d)
    b = TaskBlock(p, kb, d, mode=GIVEN)
    b.w_step._can_tasks_last = b.w_step._tasks_last = False
    b.load_state(a.state())
    layouts = set()
    for t in range(12):
        active = np.sort(rng.choice(kb, 10, replace=False)) if t % 3 == 1 else slice(None)
        na = kb if isinstance(active, slice) else len(active)
        X, y = rng.normal(size=(1, na, d)), rng.choice([-1.0, 1.0], size=(1, na))
        u, V = rng.normal(size=d), rng.normal(size=(kb, d))
        for block in (a, b):
            block.predict_and_step(X, y, np.ones(na), active)
            block.dual_step(u, V)
        layouts.add(a.w_step._tasks_last)
        np.testing.assert_allclose(a.W, b.W, rtol=1e-12, atol=1e-12)
    assert layouts == {True, False}
    np.testing.assert_allclose(a.w_step.state()["M"], b.w_step.state()["M"], rtol=1e-12, atol=1e-12)
