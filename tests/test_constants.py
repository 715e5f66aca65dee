"""The documented constants and defaults, pinned by their literal values.

Other tests build their expectations from the constants they import (experts.STEP_MULTIPLE,
PRIOR_FIRST, ...), so a change to one of them would pass them all. Here every value is written out as
docs/ALGORITHMS.md, the user's guide, README.md and the docstrings state it, and the experts' vote
is checked against weights and votes computed by hand from those numbers: changing a documented
constant must fail here, and the docs must be changed with it.
"""
import math
import re
from pathlib import Path

import numpy as np
import pytest

from omtl_mpi.algorithms.admm import ADAPTIVE_ETA, PAPER, AdmmParams
from omtl_mpi.algorithms.experts import (BAYES_HANDOVER, EXPERTS, PRIOR_FIRST, STEP_MULTIPLE,
                                         ExpertVote)
from omtl_mpi.options import run_config

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_votes_constants():
    """docs/ALGORITHMS.md section 2.6: prior pi = (0.99, 0.005, 0.005), eta_t = c sqrt(8 ln 3 /
    max(t - 1, 1)), c = 16; the experts in this order (the first is the ADMM model, the one
    with the prior)."""
    assert STEP_MULTIPLE == 16.0
    assert PRIOR_FIRST == 0.99
    assert EXPERTS == ("multi-task", "shared", "related")
    assert BAYES_HANDOVER == 256            # section 2.7: a long stream is handed over
    np.testing.assert_allclose(ExpertVote(2, total_tasks=2).weights(), [0.99, 0.005, 0.005],
                               rtol=1e-14)


@pytest.mark.parametrize("K, weights1, follows, weights2", [
    # eta_2 = 16 sqrt(8 ln 3 / 1) = 47.43372; after one mistake of the ADMM expert in K tasks,
    # p_0 = 0.99 exp(-47.43372 / K) / (0.99 exp(-47.43372 / K) + 0.005 + 0.005):
    #   K = 10: 0.99 exp(-4.743372) = 0.0086256, p_0 = 0.46300 < 1/2: the vote leaves it;
    #   K = 11: 0.99 exp(-4.312157) = 0.0132690, p_0 = 0.57027 >= 1/2: the vote still follows it.
    # eta_3 = 16 sqrt(8 ln 3 / 2) = 33.54071, two mistakes: exp(-67.08141 / K) in place.
    # (Given 0.99 this holds only for 15.50 < c <= 17.05; given c = 16, only for a prior
    # between 0.98677 and 0.99136.)
    (10, [0.4630046511386581, 0.26849767443067096, 0.26849767443067096], False,
     [0.1078376350010466, 0.4460811824994767, 0.4460811824994767]),
    (11, [0.570272570998663, 0.21486371450066846, 0.21486371450066846], True,
     [0.18195016923043963, 0.4090249153847802, 0.4090249153847802]),
])
def test_the_vote_on_a_hand_computed_stream(K, weights1, follows, weights2):
    """K tasks, one feature x = 1. Every round the 'shared' and 'related' experts say -1 on
    every task and are right (y = -1); the ADMM expert says -1 too except on task 0, where it
    says +1 and is wrong. Round 1 follows the prior (task 0 predicts +1); after that one
    mistake, the weights and round 2's vote on task 0 are the hand-computed ones above."""
    vote = ExpertVote(K, total_tasks=K)
    margins = -np.ones((3, 1, K))             # every expert's margin on every task's x
    margins[0, 0, 0] = 1.0                    # the ADMM expert's on task 0: +1
    y = -np.ones((1, K))
    expected_first = [True] + [False] * (K - 1)

    def round_(expected_votes):
        assert vote.predict(margins)[0].tolist() == expected_votes
        vote.update(y, slice(None))
        vote.set_totals(vote.mistakes.sum(axis=1))      # one block: its sums are every task's

    round_(expected_first)
    assert vote.mistakes.sum(axis=1).tolist() == [1.0, 0.0, 0.0] and vote.steps == 1.0
    np.testing.assert_allclose(vote.weights(), weights1, rtol=1e-12)
    round_([follows] + [False] * (K - 1))
    assert vote.mistakes.sum(axis=1).tolist() == [2.0, 0.0, 0.0] and vote.steps == 2.0
    np.testing.assert_allclose(vote.weights(), weights2, rtol=1e-12)
    assert vote.predict(margins)[0].tolist() == [False] * K


def test_the_weights_of_unequal_mistakes_by_hand():
    """K = 4 tasks, t = 8 instances each, M = (6, 1, 3): eta_9 = 16 sqrt(8 ln 3 / 8) =
    16.770353, p proportional to (0.99 e^(-16.770353 * 6 / 4), 0.005 e^(-16.770353 / 4),
    0.005 e^(-16.770353 * 3 / 4))."""
    vote = ExpertVote(2, total_tasks=4)
    vote.steps = 8.0
    vote.set_totals([6.0, 1.0, 3.0])
    eta = 16.77035318349128
    q = np.array([0.99 * math.exp(-eta * 6 / 4), 0.005 * math.exp(-eta / 4),
                  0.005 * math.exp(-eta * 3 / 4)])
    np.testing.assert_allclose(vote.weights(), q / q.sum(), rtol=1e-10)
    np.testing.assert_allclose(vote.weights(), [1.5576726980547533e-07, 0.9997716708909549,
                                                2.2817334177515071e-04], rtol=1e-9)


def test_the_admm_defaults():
    """The documented defaults: rho = 0.1, the paper's lambdas / 10^4 (lambda1 = lambda3 = lambda4 =
    1e-6, lambda2 = 1e-5), the AROW w-step with the squared hinge, eta = 1 (ADAPTIVE_ETA),
    r auto, the vote, no Omega learning; README: an intercept."""
    p = AdmmParams()
    assert (p.rho, p.lambda1, p.lambda2, p.lambda3, p.lambda4) == (0.1, 1e-6, 1e-5, 1e-6, 1e-6)
    assert (p.variant, p.loss, p.w_step, p.eta, p.arow_r) == ("exact", "squared-hinge", "arow", None, None)
    assert (p.relationship, p.omega_every, p.omega_eps, p.experts) == (False, 1, 1e-8, True)
    assert (p.delta, p.class_weight) == (1.0, "none")
    cfg = run_config({})                      # what `omtl-mpi run` with no flag runs
    assert cfg.algo == "c-admm" and cfg.params == p
    assert (cfg.intercept, cfg.scale, cfg.batch, cfg.topology) == (True, "none", 1, "ring")


def test_eta_auto():
    """eta auto: sqrt(T) for the euclid w-step, 1 (ADAPTIVE_ETA) for adagrad and arow."""
    assert ADAPTIVE_ETA == 1.0
    assert AdmmParams(w_step="euclid").resolved(400).eta == 20.0
    assert AdmmParams(w_step="adagrad").resolved(400).eta == 1.0
    assert AdmmParams(w_step="arow").resolved(400).eta == 1.0
    assert AdmmParams(w_step="arow", eta=0.3).resolved(400).eta == 0.3


def test_the_paper_preset():
    """--preset paper (docs/ALGORITHMS.md section 1): no intercept or scaling, euclid w-step, eta = sqrt(T),
    rho = lambda2 = 0.1, lambda1 = lambda3 = lambda4 = 0.01, hinge loss, Omega learned every
    round, no experts' vote."""
    assert PAPER == {"variant": "exact", "loss": "hinge", "w_step": "euclid", "eta": None,
                     "rho": 0.1, "lambda1": 0.01, "lambda2": 0.1, "lambda3": 0.01,
                     "lambda4": 0.01, "relationship": True, "class_weight": "none",
                     "experts": False}
    cfg = run_config({"preset": "paper"})
    p = cfg.params
    assert (cfg.intercept, cfg.scale) == (False, "none")
    assert (p.rho, p.lambda1, p.lambda2, p.lambda3, p.lambda4) == (0.1, 0.01, 0.1, 0.01, 0.01)
    assert (p.loss, p.w_step, p.variant, p.relationship, p.omega_every, p.experts) == \
        ("hinge", "euclid", "exact", True, 1, False)
    assert p.resolved(900).eta == 30.0


def test_arow_scales():
    """r auto: 0.2 times the mean squared norm of the task's first mini-batch for the arow
    w-step (1.0 in its diagonal form), 0.5 times it for single-task AROW (2.0 diagonal), and
    these are the factors the learners use (more cases, with these literals, in test_wsteps.py's
    test_auto_r_* tests)."""
    from omtl_mpi.algorithms import independent, wsteps
    assert wsteps.AROW_W_STEP_R_PER_MEAN_SQ_NORM == 0.2
    assert wsteps.AROW_DIAGONAL_W_STEP_R_PER_MEAN_SQ_NORM == 1.0
    assert independent.AROW_R_PER_MEAN_SQ_NORM == 0.5
    assert independent.AROW_DIAGONAL_R_PER_MEAN_SQ_NORM == 2.0
    # a mini-batch of two instances per task: squared norms 9 and 1 (task 0), 4 and 16 (task 1)
    X = np.array([[[1.0, 2.0, 2.0], [2.0, 0.0, 0.0]],
                  [[0.0, 0.0, 1.0], [0.0, 4.0, 0.0]]])
    step = wsteps.ArowStep(AdmmParams(w_step="arow", eta=1.0), 2, 3)
    step.step(np.zeros((2, 3)), np.zeros((2, 3)), X, np.zeros((2, 2)), np.full(2, 0.5),
              np.zeros((2, 3)), slice(None))
    np.testing.assert_allclose(step.r, [0.2 * 5.0, 0.2 * 10.0], rtol=1e-15)
    node = independent.ArowNode(independent.ArowParams(), 2, 3, 0, 2)
    node.local_step(X, np.ones((2, 2)), np.full(2, 0.5))
    np.testing.assert_allclose(node.r, [0.5 * 5.0, 0.5 * 10.0], rtol=1e-15)


def test_the_other_learners_defaults():
    """As their docstrings and --help state them."""
    from omtl_mpi.algorithms.dpsgd import DpsgdParams
    from omtl_mpi.algorithms.independent import AdagradParams, ArowParams, PaParams, SingleParams
    from omtl_mpi.algorithms.server_baselines import DromParams, PmscLogParams, PooledParams
    assert (DpsgdParams().gamma0, DpsgdParams().decay) == (0.1, "sqrt")
    assert PaParams().C == 1.0
    assert (AdagradParams().gamma0, AdagradParams().delta) == (1.0, 1.0)
    assert ArowParams().arow_r is None
    assert PooledParams().gamma0 == 0.1
    d = DromParams()
    assert (d.gamma0, d.mu, d.cap, d.tau, d.omega_eps) == (0.1, 0.01, 2.0, 1, 0.01)
    s = SingleParams()
    assert (s.lambda4, s.relationship, s.experts, s.w_step, s.loss) == \
        (0.0, False, False, "arow", "squared-hinge")
    m = PmscLogParams()
    assert (m.loss, m.lambda4, m.relationship, m.experts, m.w_step, m.variant) == \
        ("logistic", 0.0, False, False, "euclid", "exact")
    assert (m.lambda1, m.lambda2, m.lambda3) == (0.01, 0.1, 0.01)


def _documents() -> list:
    """The manual's Markdown files (docs/*.md, not the generated docs/results/) and README.md,
    whitespace collapsed: the values must be stated by hand where a user reads them."""
    paths = sorted(DOCS.glob("*.md")) + [DOCS.parent / "README.md"]
    return [re.sub(r"\s+", " ", p.read_text()) for p in paths]


@pytest.mark.parametrize("phrase", [
    "the prior pi = (0.99, 0.005, 0.005)", "c sqrt(8 ln n / max(t - 1, 1)), c = 16",
    "r = 0.2 times the squared norm of the task's first nonzero instance",
    "1.0 times in AROW's diagonal form",
    "From a task's 256th instance on",
    "uses 0.5 with its full covariance and 2.0 with its diagonal",
    "lambda1 = lambda3 = lambda4 = 10^-6, lambda2 = 10^-5", "rho = 0.1 as in the paper",
    "their default is eta = 1 (`ADAPTIVE_ETA`)",
])
def test_the_docs_still_state_these_values(phrase):
    """The values pinned above are the documented ones: changing one means changing both. The
    phrase may move between the documents; it must be in one of them."""
    assert any(phrase in text for text in _documents()), \
        f"no document under docs/ nor README.md says {phrase!r} any more"
