"""The ADMM multi-task math shared by C-ADMM and D-ADMM (docs/ALGORITHMS.md sections 2-4), as pure numpy.

Three pieces, each a pure function of arrays plus a small state object:

* :class:`AdmmParams` - the hyper-parameters, validated once;
* :class:`TaskBlock` - the worker side for a contiguous block of tasks: predict, w-step
  (eq. solution1-1), message ``c_k = z_k + rho w_k`` and the z-step (eq. solution1-4);
* :class:`Consensus` - the server side: (u, V) from C by variant "exact" or "paper" and the
  Omega update every m rounds.  D-ADMM nodes run the very same object on their gossiped table.

Arrays hold one row per task (K x d): the transpose of the paper's d x K matrices, so that a
block of tasks is a contiguous slice and a row is what travels over MPI.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import ClassVar

import numpy as np

from ..data.sparse import SparseRows, rows_dense
from ..errors import ConfigError, UserError
from .bayes import EmpiricalBayes
from . import mixture
from .mixture import MixtureBayes
from .experts import (BAYES, MODELS, MOMENT, ROWS, ExpertVote, Related, inverse_norms, moment,
                      moment_change, vote_experts)
from .losses import LOSSES, descent_coef, predict
from .relationship import DENSE_STEP_TASKS, ExactStep, Relationship, paper_step, update_omega
from .wsteps import (AROW_DIAGONAL_ABOVE, AROW_FULL_MAX, AROW_W_STEP_R_PER_MEAN_SQ_NORM,
                     COVARIANCES, STEP_CLASSES, W_STEP_CLASSES, arow_form, make_w_step)

VARIANTS = ("exact", "paper")
W_STEPS = tuple(W_STEP_CLASSES)
# --coordinates: a round steps every coordinate of its tasks' models (the paper's), or only
# those where the round's instances are non-zero; auto: nonzero above LARGE_DIM weights with
# a diagonal w-step (docs/ALGORITHMS.md section 2.1, *Large d*). Its own d, above AROW's
# diagonal one: below it a diagonal round that steps every coordinate costs little
# (docs/PERFORMANCE.md, *AROW's covariance*), and nonzero only approximates the paper's step,
# the more so the larger the lambdas
COORDINATES = ("auto", "all", "nonzero")
LARGE_DIM = 2048
# The paper's model and settings (docs/ALGORITHMS.md section 1): what --preset paper gives the
# ADMM learners
PAPER = {"variant": "exact", "loss": "hinge", "w_step": "euclid", "eta": None, "rho": 0.1,
         "lambda1": 0.01, "lambda2": 0.1, "lambda3": 0.01, "lambda4": 0.01,
         "relationship": True, "class_weight": "none", "experts": False}
# eta of the adaptive w-steps when none is given: their metric D_t grows by itself, so the
# Euclidean step's T-dependent eta = sqrt(T) would shrink their step twice (docs/ALGORITHMS.md
# section 2.1)
ADAPTIVE_ETA = 1.0


class DivergenceError(UserError):
    """The chosen hyper-parameters make the iteration diverge (reported, never NaN results)."""


@dataclass(frozen=True)
class AdmmParams:
    """Hyper-parameters of the ADMM learners.

    The defaults are omtl-mpi's (docs/GUIDE.md, *How the defaults were chosen*): the AROW
    w-step with the squared hinge and AROW's r at each task's scale, the paper's lambdas
    / 10^4 (small enough for unit-norm features), and the experts' vote. :data:`PAPER` holds
    the paper's settings (docs/ALGORITHMS.md section 1; ``--preset paper``, :meth:`paper`).

    ``eta = None`` means the paper's ``sqrt(T)``, T the longest stream's number of rounds,
    for the Euclidean w-step, and :data:`ADAPTIVE_ETA` for the adaptive ones (their metric
    D_t grows by itself, so a step control that also grows with T would double-count it);
    resolved by :meth:`resolved`.

    ``w_step`` picks the Bregman divergence of the w-step (docs/ALGORITHMS.md section 2.1):
    ``euclid`` |w - w_t|^2 / 2 (the paper's), ``adagrad`` with D_t = diag(sqrt(delta + sum of
    squared past gradients)), ``arow`` with D_t = r I + sum over margin errors of x x^T, r =
    ``arow_r`` or, when None, each task's own from its first nonzero instance (wsteps.settle_r).

    Each field's metadata holds its option's help (:mod:`omtl_mpi.options`).
    """

    rho: float = field(default=0.1, metadata={"help": "ADMM penalty (> 0)."})
    eta: float | None = field(default=None, metadata={
        "help": "Step control (> 0). auto: sqrt(T) for the euclid w-step, T the longest "
                "stream's number of rounds; 1 for adagrad and arow.", "none_text": "auto"})
    lambda1: float = field(default=1e-6, metadata={"help": "Weight of |V|^2 (> 0)."})
    lambda2: float = field(default=1e-5, metadata={"help": "Weight of |u|^2 (> 0)."})
    lambda3: float = field(default=1e-6, metadata={"help": "Second weight of |V|^2 (>= 0)."})
    lambda4: float = field(default=1e-6, metadata={
        "help": "Weight of the relationship term tr(V Omega^-1 V^T) (>= 0)."})
    variant: str = field(default="exact", metadata={
        "help": "(u, V) step: the exact joint minimiser, or the paper's printed closed forms.",
        "choices": VARIANTS})
    loss: str = field(default="squared-hinge", metadata={
        "help": "Loss whose (sub)gradient drives the w-step (squared-hinge scales it by the "
                "missed margin, as AROW does).", "choices": LOSSES})
    relationship: bool = field(default=False, metadata={
        "help": "Learn the task-relationship matrix Omega from V (the paper's model, which "
                "--preset paper turns on), at one SVD of the K x d matrix V every "
                "--omega-every rounds. Off, Omega stays I/K (the paper's ablation 'W/O RL'; "
                "docs/GUIDE.md, The defaults, says why it is the default)."})
    omega_every: int = field(default=1, metadata={
        "help": "Update Omega every m rounds.", "metavar": "ROUNDS"})
    omega_eps: float = field(default=1e-8, metadata={
        "help": "Ridge eps added to (V^T V)^(1/2) before normalising it into Omega (>= 0)."})
    w_step: str = field(default="arow", metadata={
        "help": "ADMM learners' w-step metric: euclid (the paper's), adagrad (diagonal, from past "
                "gradients) or arow (full precision from margin errors). See docs/ALGORITHMS.md "
                "section 2.1.",
        "choices": W_STEPS})
    delta: float = field(default=1.0, metadata={
        "help": "--w-step adagrad: initial accumulator of its metric D_t = diag(sqrt(delta + sum "
                "of squared past gradients)) (> 0)."})
    arow_r: float | None = field(default=None, metadata={
        "help": "--w-step arow: r of its metric D_t, which starts at r I (> 0). "
                f"auto: each task's r is {AROW_W_STEP_R_PER_MEAN_SQ_NORM} times the squared norm "
                "of its first nonzero instance (with --batch B, the mean over the nonzero "
                "instances of its first mini-batch that has one), so that r follows the "
                "features' scale (docs/ALGORITHMS.md section 2.1).", "none_text": "auto"})
    arow_covariance: str = field(default="auto", metadata={
        "help": "--w-step arow: its metric's full d x d matrix per task, or its diagonal (d "
                f"numbers per task, O(non-zeros) per step). auto: full up to d = "
                f"{AROW_DIAGONAL_ABOVE}, diagonal above; full is refused above d = {AROW_FULL_MAX}.",
        "choices": COVARIANCES})
    coordinates: str = field(default="auto", metadata={
        "help": "The coordinates of a task's model a round steps: all (the paper's: the "
                "consensus pulls every coordinate every round, O(d) per task) or nonzero (those "
                "where the task's instances of the round are non-zero: a round costs O(non-zeros); "
                "the others wait for the next instance that has them). auto: nonzero above d = "
                f"{LARGE_DIM} with a diagonal w-step, else all (docs/ALGORITHMS.md section 2.1).",
        "choices": COORDINATES})
    class_weight: str = field(default="none", metadata={
        "help": "Weight of each instance's loss by its class. none: 1; balanced: n / (2 n_y), "
                "with n_y the task's instances of class y seen before this round (plus one, "
                "so the first round has weight 1): scikit-learn's 'balanced' without "
                "look-ahead; a number c > 0: c for +1, 1 for -1.", "metavar": "none|balanced|C"})
    experts: bool = field(default=True, metadata={
        "help": "Predict each task by a vote of three experts (its multi-task model, the shared "
                "u and the related tasks' models) weighted by their mistakes on all tasks, so that "
                "the sharing adapts to how related the tasks are; with more tasks than features "
                "a fourth leads it, each task's empirical-Bayes model, which lets short streams "
                "borrow from the tasks like them (docs/ALGORITHMS.md sections 2.6 and 2.7); "
                "--no-experts predicts with the ADMM model alone, as the paper does."})

    def __post_init__(self):
        problems = []

        def finite(name, value):
            if not (isinstance(value, (int, float)) and math.isfinite(value)):
                problems.append(f"--{name.replace('_', '-')} must be a finite number, got {value!r}")
                return False
            return True

        for name in ("rho", "lambda1", "lambda2", "delta", "arow_r"):
            value = getattr(self, name)
            if value is None and name == "arow_r":      # auto
                continue
            if finite(name, value) and value <= 0:
                problems.append(f"--{name.replace('_', '-')} must be > 0, got {value!r}")
        if self.w_step not in W_STEPS:
            problems.append(f"--w-step must be one of {', '.join(W_STEPS)}, got {self.w_step!r}")
        if self.arow_covariance not in COVARIANCES:
            problems.append(f"--arow-covariance must be one of {', '.join(COVARIANCES)}, got "
                            f"{self.arow_covariance!r}")
        if self.coordinates not in COORDINATES:
            problems.append(f"--coordinates must be one of {', '.join(COORDINATES)}, got "
                            f"{self.coordinates!r}")
        elif (self.coordinates == "nonzero" and self.w_step == "arow"
              and self.arow_covariance == "full"):
            problems.append("--coordinates nonzero needs a diagonal w-step: the full arow metric "
                            "moves every coordinate at every step; use --arow-covariance diagonal")
        for name in ("lambda3", "lambda4", "omega_eps"):
            value = getattr(self, name)
            if finite(name, value) and value < 0:
                problems.append(f"--{name.replace('_', '-')} must be >= 0, got {value!r}")
        # eta weighs the w-step's proximal term: at 0 the linearised step has nothing to bound
        # it and the model runs off to inf within a few rounds
        if self.eta is not None and finite("eta", self.eta) and self.eta <= 0:
            problems.append(f"--eta must be > 0 (the w-step's proximal weight), got {self.eta!r}")
        if self.variant not in VARIANTS:
            problems.append(f"--variant must be one of {', '.join(VARIANTS)}, got {self.variant!r}")
        if self.loss not in LOSSES:
            problems.append(f"--loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        if class_weights(self.class_weight) is None:
            problems.append(f"--class-weight must be none, balanced or a number > 0 (the weight of "
                            f"class +1), got {self.class_weight!r}")
        if not isinstance(self.experts, bool):
            problems.append(f"--experts must be true or false, got {self.experts!r}")
        if not isinstance(self.omega_every, int) or self.omega_every < 1:
            problems.append(f"--omega-every must be an integer >= 1 (rounds), got {self.omega_every!r}")
        if problems:
            raise ConfigError("\n".join(problems))

    # fields a learner built on these fixes, and why (fixed_fields, 'omtl-mpi algos NAME')
    FIXED: ClassVar[tuple] = ()
    FIXED_WHY: ClassVar[str] = ""

    def inactive(self) -> dict:
        """The fields that have no effect with these values, each with the reason (an option
        given for one of them is refused: :func:`omtl_mpi.options.run_config`)."""
        out = {}
        if self.w_step != "arow":
            out["arow_r"] = f"it is the arow w-step's r, and the w-step is {self.w_step}"
            out["arow_covariance"] = f"it is the arow w-step's, and the w-step is {self.w_step}"
        if self.w_step != "adagrad":
            out["delta"] = f"it is the adagrad w-step's, and the w-step is {self.w_step}"
        if not self.relationship:
            why = "Omega is learned only with --relationship (or --preset paper)"
            out["omega_every"] = out["omega_eps"] = why
        return out

    @classmethod
    def paper(cls, **changes) -> "AdmmParams":
        """The paper's settings (:data:`PAPER`, but what the class fixes), with ``changes``."""
        return cls(**{**{k: v for k, v in PAPER.items() if k not in cls.FIXED}, **changes})

    @property
    def a(self) -> float:
        """``a = lambda1 + lambda3``."""
        return self.lambda1 + self.lambda3

    def resolved(self, rounds: int) -> "AdmmParams":
        """These parameters with ``eta`` fixed for a run of ``rounds`` rounds: the paper's
        ``sqrt(T)`` when eta was left unset (:data:`ADAPTIVE_ETA` for the adaptive w-steps)."""
        if self.eta is not None:
            return self
        eta = math.sqrt(max(rounds, 1)) if self.w_step == "euclid" else ADAPTIVE_ETA
        return AdmmParams(**{**asdict(self), "eta": eta})


def coordinates_of(params, dim: int) -> str:
    """"all" or "nonzero": the coordinates a round of these ADMM ``params`` steps at ``dim``
    weights (``--coordinates``; auto: nonzero above :data:`LARGE_DIM` with a diagonal w-step).
    Raises ConfigError where the arow w-step would be full and it is refused at that d."""
    full = params.w_step == "arow" and arow_form(params.arow_covariance, dim) == "full"
    if params.coordinates == "nonzero" and full:
        raise ConfigError(f"--coordinates nonzero steps only the instances' coordinates, which "
                          f"needs a diagonal metric, and the arow w-step keeps its full {dim} x "
                          f"{dim} covariance at d = {dim}: add --arow-covariance diagonal, or "
                          f"use --w-step adagrad")
    if params.coordinates != "auto":
        return params.coordinates
    if dim <= LARGE_DIM:
        return "all"
    return "all" if full else "nonzero"


def class_weights(value):
    """``--class-weight`` as the learners use it: "none", "balanced" or the weight of class +1
    (a float > 0); None for a value that is none of these."""
    if value in ("none", "balanced"):
        return value
    try:
        c = float(value)
    except (TypeError, ValueError):
        return None
    return c if math.isfinite(c) and c > 0 else None


def fixed_fields(params) -> None:
    """ConfigError unless every field in ``type(params).FIXED`` has its class default: for the
    learners built on these parameters that fix some of them (``FIXED_WHY`` says why)."""
    cls = type(params)
    wrong = [f"--{f.name.replace('_', '-')}" for f in fields(cls)
             if f.name in cls.FIXED and getattr(params, f.name) != f.default]
    if wrong:
        raise ConfigError(f"{', '.join(wrong)} cannot be set: {cls.FIXED_WHY} (see 'omtl-mpi algos')")


# How a block's task parts v_k come about (TaskBlock's ``coupling``):
FIXED = "fixed"     # Omega fixed at I/K, exact step: v_k = f (c_k - rho u), from the task's own c_k and u
GIVEN = "given"     # a learned Omega (or the paper variant) couples the tasks: V comes from the consensus step
ALONE = "alone"     # every task its own u_k and v_k (ADMM-Single)


def descent(X, coef: np.ndarray, inv_count: np.ndarray, sparse: bool) -> np.ndarray:
    """D = -g (na x d), the batch-mean negative loss gradient of the instances X (B, na, d)."""
    if sparse:
        D = X.combine(coef)
        if X.shape[0] > 1:
            D *= inv_count[:, None]
    elif X.shape[0] == 1:     # with B = 1 every count is 1 (padding has a zero gradient)
        D = X[0] * coef.T
    else:
        D = np.einsum("bk,bkd->kd", coef, X)
        D *= inv_count[:, None]
    return D


def related_default(n_tasks: int, dim: int, coordinates: str) -> str:
    """The related expert's form where a role does not choose it: every task's model (and
    the block's cosines) where steps change only their instances' coordinates, else H with
    more tasks than features and the block's related rows with fewer."""
    if coordinates == "nonzero" and n_tasks <= dim:
        return MODELS
    return MOMENT if n_tasks > dim else ROWS


def coupling(params) -> str:
    """FIXED where every task's v_k follows from its own message and the shared u (Omega fixed
    at I/K with the exact step: the defaults), else GIVEN."""
    return FIXED if params.variant == "exact" and not params.relationship else GIVEN


class TaskBlock:
    """Worker-side ADMM state and steps for a contiguous block of tasks.

    Holds ``W``, ``Z`` and ``C`` (kb x d): C is each task's last message ``c_k = z_k + rho w_k``,
    the one the consensus holds for it. Every step touches only the round's active tasks: a
    task without an instance in a round takes no w-step and no z-step, and the consensus keeps
    its last message (docs/ALGORITHMS.md section 1). A task's model starts at the shared u at
    its first instance (until then it predicts with u). All steps are vectorised over the
    active rows and the mini-batch.

    Parameters
    ----------
    params : AdmmParams
        With ``eta`` resolved.
    n_tasks, dim : int
        The block's tasks kb and weights d.
    mode : {FIXED, GIVEN, ALONE}
        How the task parts v_k come about (:func:`coupling`; ALONE for tasks learned alone).
    message : ndarray, shape (n_tasks, dim), optional
        Where to keep C (a view of a message buffer, so that no copy is needed); by default an
        array of the block's own.
    total_tasks : int, optional
        Every task of the run (K), for the vote and the fixed consensus; the block's own by
        default.
    related_mode : str, optional
        The form of the related expert's statistic (:class:`.experts.Related`).
    groups : bool
        Give the empirical-Bayes expert a mixture prior (:mod:`.mixture`, where
        :func:`.mixture.used`): its EM steps need every block's E-step sums, which C-ADMM's
        server adds (``bayes.sum_blocks``) and D-ADMM's nodes add over the graph
        (:attr:`.dadmm.DAdmmNode.sums`).

    Attributes
    ----------
    delta_C : ndarray, shape (d,)
        The change of the sum of C over the block in the last :meth:`predict_and_step`.
    delta_mistakes : ndarray, shape (n_experts,)
        With the vote, the experts' mistakes of the last round, summed over the block.
    delta_H : ndarray, shape (d, d)
        With the vote in the ``moment`` form, the change of the block's part of H.
    expert_names : tuple of str
        The experts of the vote, in order (:func:`.experts.vote_experts`; empty without it).
    bayes : EmpiricalBayes, MixtureBayes or None
        The empirical-Bayes expert, where the vote has it; its ``delta`` is the change of the
        block's statistics in the last round.
    started : ndarray of bool, shape (n_tasks,)
        Which tasks have had an instance (None for tasks learned alone).
    """

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, mode: str = FIXED,
                 message: np.ndarray | None = None, total_tasks: int | None = None,
                 related_mode: str | None = None, groups: bool = False):
        if params.eta is None:
            raise ValueError("resolve eta (AdmmParams.resolved) before building a TaskBlock")
        self.p, self.mode = params, mode
        K = total_tasks or n_tasks
        self.W = np.zeros((n_tasks, dim))
        self.Z = np.zeros((n_tasks, dim))
        self.C = np.zeros((n_tasks, dim)) if message is None else message
        self.C[...] = 0.0
        self.u = np.zeros((n_tasks, dim)) if mode == ALONE else np.zeros(dim)
        self.V = None if mode == FIXED else np.zeros((n_tasks, dim))
        self.started = None if mode == ALONE else np.zeros(n_tasks, dtype=bool)
        self._all_started = False           # every task has started (a shortcut)
        self._rho = np.array(params.rho)               # a cheaper numpy operand than a float
        if mode == FIXED:
            # v_k = f (c_k - rho u), f = 1 / (a + rho + lambda4 K): P of Omega = I/K; so the
            # w-step's rho (u + v_k) - z_k = rho f c_k + rho g u - z_k and the z-step's
            # z_k = g (c_k - rho u), with g = 1 - rho f computed without cancellation
            step = ExactStep(Relationship.identity(K), params.a, params.rho, params.lambda2,
                             params.lambda4)
            self._f = np.array(step.f_rest)
            self._rho_f = np.array(params.rho * step.f_rest)
            self._g = np.array(step.g_rest)
            self._rho_g = np.array(params.rho * step.g_rest)
            self._rho_g_u = np.zeros(dim)               # rho g u, for the u of the last step
        elif mode == ALONE:
            # K = 1, no lambda4 term: u_k = c_k (1 - rho p) / (lambda2 + rho - rho^2 p),
            # v_k = (c_k - rho u_k) p, p = 1 / (a + rho)
            self._p_alone = 1.0 / (params.a + params.rho)
            self._u_alone = (1.0 - params.rho * self._p_alone) / (
                params.lambda2 + params.rho - params.rho ** 2 * self._p_alone)
        self.w_step = make_w_step(params, n_tasks, dim)
        # --coordinates: every coordinate each round, or those of the round's instances only
        self.coordinates = coordinates_of(params, dim)
        # --experts: what is predicted is the vote of experts.py; the ADMM steps are the same
        voting = params.experts and mode != ALONE
        self.expert_names = vote_experts(K, dim, params.class_weight) if voting else ()
        self.experts = ExpertVote(n_tasks, K, len(self.expert_names)) if voting else None
        self.related = (Related(n_tasks, dim, K, related_mode or related_default(K, dim, self.coordinates))
                        if self.experts is not None else None)
        # with groups (the EM steps' sums over the blocks: C-ADMM's server, D-ADMM's graph),
        # the mixture prior
        self.bayes = ((MixtureBayes(n_tasks, dim, K) if groups and mixture.used(dim)
                       else EmpiricalBayes(n_tasks, dim))
                      if BAYES in self.expert_names else None)
        # 1 / |w_k| of every task (inverse_norms of W), kept by predict_and_step for the next
        # round's related model; None where W changed otherwise (recomputed when next needed)
        self._inverse = None
        # the block's part of H (sum of y_k y_k^T, y_k = w_k / sqrt|w_k|) after the last round
        # of every task, for the next one's change of H; None where not known
        self._gram = None
        self._ones = np.ones(n_tasks)
        # each expert's row in the vote's margins (expert_names' order)
        self._expert_row = {name: i for i, name in enumerate(self.expert_names)}
        # with --coordinates nonzero: the last step's (task row, coordinate) pairs and their new
        # messages (for the z-step), the change of the sum of C at its coordinates, the W entries
        # it changed (for the related experts' copies of every model)
        self._pairs = None
        self.delta_pairs = (np.zeros(0, dtype=np.intp), np.zeros(0))
        self.W_pairs = (np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp), np.zeros(0))
        self.delta_C = np.zeros(dim)
        self.delta_mistakes = np.zeros(len(self.expert_names))
        # the change of H (the related expert's moment form only: d x d)
        self.delta_H = (np.zeros((dim, dim)) if self.related is not None
                        and self.related.mode == MOMENT else None)
        self._active = slice(None)
        # --class-weight: each task's instances of class -1 and +1 seen so far
        self._weighted = class_weights(params.class_weight)
        self.class_seen = np.zeros((2, n_tasks)) if self._weighted != "none" else None
        # the losses whose factor a round of one instance computes as a float (the Euclidean
        # step, which does not read it, and no class weights)
        self._scalar_loss = (params.loss if params.loss in ("hinge", "perceptron")
                             and params.w_step == "euclid" and self._weighted == "none" else None)

    # for .undo: constants, and what a round computes for its own use (the deltas its worker
    # sends, the pairs of its sparse step) before anything reads it
    NOT_STATE = ("_rho", "_f", "_rho_f", "_g", "_rho_g", "_ones", "_pairs", "delta_pairs",
                 "_scalar_loss", "W_pairs", "delta_C", "delta_mistakes", "delta_H", "_active")

    def row_axes(self) -> dict:
        """{attribute: axis of the tasks} of the arrays a round changes only at its active
        tasks (:mod:`.undo`): V and u are per task only for tasks learned alone (else the
        consensus's, changed whole)."""
        axes = {"W": 0, "Z": 0, "C": 0, "started": 0, "_inverse": 0, "class_seen": 1}
        if self.mode == ALONE:
            axes.update(V=0, u=0)
        return axes

    def task_parts(self, active, u=None) -> np.ndarray:
        """v_k of the tasks ``active`` (rows), with the shared ``u`` (default: the last one)."""
        if self.mode == FIXED:
            v = np.subtract(self.C[active], self._rho * (self.u if u is None else u))
            v *= self._f
            return v
        return self.V[active]

    def predict_and_step(self, X: np.ndarray, y: np.ndarray, inv_count: np.ndarray,
                         active=slice(None)) -> np.ndarray:
        """Predict a round's instances, then take the w-step of the active tasks and write
        their messages into C.

        Parameters
        ----------
        X : ndarray, shape (B, na, d)
            The round's mini-batch of every active task (zero rows for padding).
        y : ndarray of float, shape (B, na)
            Labels, 0 for padding.
        inv_count : ndarray, shape (na,)
            1 / (number of real instances of each task in this batch).
        active : slice or ndarray of int
            Which of the block's tasks the na columns are, in increasing order
            (``slice(None)``: all of them).

        Returns
        -------
        positive : ndarray of bool, shape (B, na)
            The predictions made before the labels were revealed (True for +1).
        """
        p = self.p
        if self.coordinates == "nonzero":
            return self._step_pairs(X if isinstance(X, SparseRows) else SparseRows.from_dense(X),
                                    y, inv_count, active)
        sparse = isinstance(X, SparseRows)
        self._active = active
        W = self.W[active]
        start = self._starting(W, active)
        if start is not W:
            self.started[active] = True
            self._all_started = bool(self.started.all())
        margins = X.margins(start) if sparse else np.vecdot(start, X)
        own = predict(margins)
        positive = own
        inverse = None
        if self.experts is not None:
            if self.related.mode == MOMENT:
                # 1 / |w_k| for the related model and the change of H: the last step's
                inverse = self._inverse_norms(active)
            experts = self._expert_margins(margins, W, X, active, inverse, store=True)
            positive = self.experts.predict(experts)
            self.delta_mistakes = self.experts.update(y, active)
        if self._scalar_loss is not None and margins.size == 1 and not sparse:
            # one instance of one task (a worker or node per task): its factor as a Python
            # float, the same operations as descent_coef's; the Euclidean step reads no coef
            m, label = margins.item(), y.item()
            if self._scalar_loss == "hinge":
                factor = label if label * m < 1.0 else 0.0
            else:
                factor = label * ((label > 0.0) != (m >= 0.0))
            D, coef = X[0] * factor, None
        else:
            coef = descent_coef(p.loss, y, margins, own)
            if self.class_seen is not None:
                coef = coef * self._class_weights(y, active)
            D = descent(X, coef, inv_count, sparse)
        # eq. solution1-1: the Bregman-proximal linearised w-step (wsteps.py), D = -g, with
        # R = rho (u + v_k) - z_k of the last consensus step
        Z = self.Z[active]
        if self.mode == FIXED:
            R = self.C[active] * self._rho_f
            R += self._rho_g_u
        else:
            R = np.add(self.V[active], self.u[active] if self.mode == ALONE else self.u)
            R *= self._rho
        R -= Z
        new = self.w_step.step(start, D, X, coef, inv_count, R, active)
        if self.related is not None and self.related.mode == MOMENT:
            new_inverse = inverse_norms(new)
            gram = moment(new, new_inverse)
            every = isinstance(active, slice)
            # the block's part of H before the round: kept from a round of every task (the
            # same product of the same rows), else from the old rows (moment_change)
            old = self._gram if every and self._gram is not None else moment(W, inverse)
            self.delta_H = np.subtract(gram, old, out=old)      # old is not needed again
            self._gram = gram if every else None
            self._inverse[active] = new_inverse
        if self.bayes is not None:
            self.bayes.learn(rows_dense(X), y, active)
        self.W[active] = new
        C = np.multiply(new, self._rho, out=new)        # c_k = z_k + rho w_k
        C += Z
        if self.mode == FIXED:
            # the sum over the rows as a product: numpy's sum(axis=0) over d-long rows costs 3x
            self.delta_C = self._ones[:len(C)] @ (C - self.C[active])
        self.C[active] = C
        return positive

    def _inverse_norms(self, active) -> np.ndarray:
        """1 / |w_k| of the tasks ``active`` (:func:`.experts.inverse_norms` of their W)."""
        if self._inverse is None:
            self._inverse = inverse_norms(self.W)
        return self._inverse[active]

    def _expert_margins(self, margins, W, X, active, inverse=None, store=False) -> np.ndarray:
        """Every expert's margins (experts, B, na), in the vote's order (:attr:`expert_names`):
        ``margins`` of the multi-task models W, the shared u's, the related models' and,
        where the vote has it, the empirical-Bayes models' (``store`` keeps the matrices they
        refresh). X may be sparse rows; the empirical-Bayes expert, used only up to bayes.MAX_DIM
        (:func:`.bayes.used`), reads the round's rows dense: B na d numbers, no more than its
        own kb d^2."""
        sparse = isinstance(X, SparseRows)
        row = self._expert_row
        out = np.empty((len(row),) + margins.shape)
        out[row["multi-task"]] = margins
        out[row["shared"]] = X.dot(self.u) if sparse else X @ self.u
        out[row["related"]] = self.related.margins(W, X, active, inverse)
        if self.bayes is not None:
            out[row[BAYES]] = self.bayes.margins(rows_dense(X), active, store)
        return out

    def _entry_models(self, flat, cols) -> np.ndarray:
        """w_k at the pairs ``flat`` (indices into the flattened kb x d W), of coordinates
        ``cols``: u for a task without an instance so far (it starts at u, :meth:`_starting`)."""
        values = np.take(self.W, flat)
        if self.started is not None and not self._all_started:
            fresh = ~self.started[flat // self.W.shape[1]]
            if fresh.any():
                values[fresh] = self.u[cols[fresh]]
        return values

    def _pair_margins(self, X: SparseRows, act: np.ndarray):
        """(the margins w_k . x (B, na) of sparse instances of the block rows ``act``, the
        models at X's entries, the entries' flat indices in the block's kb x d arrays)."""
        flat = act[X.task_ids()] * self.W.shape[1] + X.indices
        at_entries = self._entry_models(flat, X.indices)
        return X.row_sums(X.data * at_entries).reshape(X.shape[:2]), at_entries, flat

    def _pair_experts(self, X: SparseRows, margins: np.ndarray, act: np.ndarray, active,
                      store: bool = False):
        """The experts' margins (experts, B, na) on sparse instances (the related model from
        the block's rows where its form needs them)."""
        W = self.W[act] if self.related.mode == MOMENT else None
        return self._expert_margins(margins, W, X, active, store=store)

    def _step_pairs(self, X: SparseRows, y, inv_count, active) -> np.ndarray:
        """:meth:`predict_and_step` with ``--coordinates nonzero``: every step of the active
        tasks only at the (task, coordinate) pairs where their instances are non-zero, in
        O(non-zeros); every other coordinate of their W, Z and C stays as it is
        (docs/ALGORITHMS.md section 2.1, *Large d*)."""
        p = self.p
        self._active = active
        d = self.W.shape[1]
        act = np.arange(self.W.shape[0]) if isinstance(active, slice) else np.asarray(active)
        margins, at_entries, flat = self._pair_margins(X, act)
        own = predict(margins)
        positive = own
        if self.experts is not None:
            positive = self.experts.predict(self._pair_experts(X, margins, act, active, store=True))
            self.delta_mistakes = self.experts.update(y, active)
        coef = descent_coef(p.loss, y, margins, own)
        if self.class_seen is not None:
            coef = coef * self._class_weights(y, active)
        tasks, cols, inverse = X.pairs()
        rows = act[tasks]
        if inverse is not None:
            flat = rows * d + cols
            at_entries = self._entry_models(flat, cols)
        W = at_entries
        D = X.pair_sums(X.data * coef.reshape(-1)[X.row_ids()], inverse)
        if X.shape[0] > 1:
            D *= inv_count[tasks]
        Z = np.take(self.Z, flat)
        if self.mode == FIXED:
            R = np.take(self.C, flat)
            R *= self._rho_f
            R += np.take(self._rho_g_u, cols)
        else:
            R = np.add(np.take(self.V, flat), np.take(self.u, flat) if self.mode == ALONE
                       else np.take(self.u, cols))
            R *= self._rho
        R -= Z
        new = self.w_step.step_pairs(W, D, R, X, coef, inv_count, active, rows, flat, inverse)
        if self.started is not None and not self._all_started:
            self.started[act] = True
            self._all_started = bool(self.started.all())
        old_rows = self.W[act] if self.related is not None and self.related.mode == MOMENT else None
        np.put(self.W, flat, new)
        self._inverse = self._gram = None
        if old_rows is not None:
            self.delta_H = moment_change(old_rows, self.W[act], inverse_norms(old_rows))
        self.W_pairs = (rows, cols, new)
        if self.bayes is not None:
            self.bayes.learn(rows_dense(X), y, active)
        C = np.multiply(new, self._rho)
        C += Z
        if self.mode == FIXED:
            self.delta_pairs = (cols, C - np.take(self.C, flat))
        np.put(self.C, flat, C)
        self._pairs = (flat, cols, C)
        return positive

    def _dual_pairs(self, u, V, cols) -> None:
        """:meth:`dual_step` on the last step's pairs only (``--coordinates nonzero``)."""
        flat, pc, C = self._pairs
        rho = self._rho
        if self.mode == ALONE:
            u_e = C * self._u_alone
            v = (C - rho * u_e) * self._p_alone
            np.put(self.u, flat, u_e)
            np.put(self.V, flat, v)
            target = u_e + v
        elif self.mode == FIXED:
            if cols is None:
                self.u[...] = u
                np.multiply(u, self._rho_g, out=self._rho_g_u)
            else:
                self.u[cols] = u
                self._rho_g_u[cols] = u * self._rho_g
            Z = C * self._g
            Z -= np.take(self._rho_g_u, pc)
            np.put(self.Z, flat, Z)
            return
        else:
            self.u[...] = u
            self.V[...] = V
            target = np.take(self.V, flat) + np.take(self.u, pc)
        target *= rho
        np.put(self.Z, flat, C - target)

    def _starting(self, W: np.ndarray, active) -> np.ndarray:
        """The rows W (tasks ``active``) a step starts from: a task without an instance so far
        starts at the shared u, where the spec's rounds without instances (zero-gradient
        w-steps and z-steps) would take its w were u to stay as it is (w_k = u, z_k = 0; docs/
        ALGORITHMS.md section 1). W itself when every task has started (a run's tasks all start
        in its first round, when u = 0, so this changes nothing in ``omtl-mpi run``)."""
        if self.started is None or self._all_started:
            return W
        fresh = ~self.started[active]
        if not fresh.any():
            return W
        start = W.copy()
        start[fresh] = self.u
        return start

    def decide(self, X: np.ndarray, active=slice(None)) -> np.ndarray:
        """The decision values (B, na) of ``X`` (B, na, d), instances of the block's tasks
        ``active``, with the block as it is, changing nothing: ``decide(X, active) >= 0`` is
        what :meth:`predict_and_step` predicts on the same X.

        Without ``--experts`` the margins ``w_k . x``; with them the weighted vote sum of
        :meth:`.experts.ExpertVote.decide`.
        """
        if self.coordinates == "nonzero":
            X = X if isinstance(X, SparseRows) else SparseRows.from_dense(X)
            act = np.arange(self.W.shape[0]) if isinstance(active, slice) else np.asarray(active)
            margins = self._pair_margins(X, act)[0]
            if self.experts is None:
                return margins
            return self.experts.decide(self._pair_experts(X, margins, act, active))
        W = self.W[active]
        if isinstance(X, SparseRows):
            margins = X.margins(self._starting(W, active))
            if self.experts is None:
                return margins
            return self.experts.decide(self._expert_margins(margins, W, X, active))
        margins = np.vecdot(self._starting(W, active), X)    # predict_and_step's, the same call
        if self.experts is None:
            return margins
        return self.experts.decide(self._expert_margins(margins, W, X, active))

    def _class_weights(self, y: np.ndarray, active) -> np.ndarray:
        """Every instance's class weight (B, na), from the counts before this round; then the
        round's labels are counted."""
        seen = self.class_seen[:, active]
        if self._weighted == "balanced":
            w = (seen.sum(axis=0) + 2.0) / (2.0 * (seen + 1.0))      # rows: class -1, +1
            weight = np.where(y > 0.0, w[1], w[0])
        else:
            weight = np.where(y > 0.0, self._weighted, 1.0)
        seen[0] += (y < 0.0).sum(axis=0)
        seen[1] += (y > 0.0).sum(axis=0)
        self.class_seen[:, active] = seen
        return weight

    def dual_step(self, u: np.ndarray, V: np.ndarray | None = None, cols=None) -> None:
        """Take the consensus and the z-step (eq. solution1-4) of the round's active tasks.

        ``u`` is the shared u (copied); ``V``, in the GIVEN mode, the block's rows of the
        consensus V (copied: every task's v_k moves with a learned Omega, so all rows are
        kept). In the ALONE mode both come from each task's own message. With
        ``--coordinates nonzero`` only the step's pairs take the z-step, and ``u`` may be the
        new values at the coordinates ``cols`` only (C-ADMM's sparse reply).
        """
        if self.coordinates == "nonzero":
            self._dual_pairs(u, V, cols)
            return
        active, rho = self._active, self._rho
        C = self.C[active]
        if self.mode == ALONE:
            u_rows = C * self._u_alone
            v = (C - rho * u_rows) * self._p_alone
            self.u[active] = u_rows
            self.V[active] = v
            target = u_rows + v
        elif self.mode == FIXED:
            self.u[...] = u
            np.multiply(u, self._rho_g, out=self._rho_g_u)
            Z = C * self._g
            Z -= self._rho_g_u                          # z_k = g (c_k - rho u)
            self.Z[active] = Z
            return
        else:
            self.u[...] = u
            self.V[...] = V
            target = self.V[active] + u
        # z + rho (w - u - v_k), with z + rho w the message C just sent
        target *= rho
        self.Z[active] = C - target

    def task_rows(self) -> dict:
        """The block's final per-task arrays: W (u for a task without an instance yet, where
        it starts), Z and V (with Omega fixed, v_k from the last u), and U for tasks learned
        alone."""
        V = self.task_parts(slice(None)) if self.mode == FIXED else self.V
        out = {"W": self._starting(self.W, slice(None)), "Z": self.Z, "V": V}
        if self.mode == ALONE:
            out["U"] = self.u
        return out

    def checked(self, rows=None) -> list:
        """The arrays whose finiteness says the block's is (:meth:`.contract.Worker.checked`):
        the tasks ``rows``'s (indices or a slice; None: every task) and the shared ones (u, the
        related expert's H), views where they can be."""
        rows = slice(None) if rows is None else rows
        arrays = [self.W[rows], self.Z[rows], self.C[rows],
                  self.u[rows] if self.mode == ALONE else self.u]
        if self.V is not None:
            arrays.append(self.V[rows])
        if self.related is not None:
            mode = self.related.mode
            arrays += ([self.related.H] if mode == MOMENT else [self.related.rows[rows]] if mode == ROWS
                       else [self.related.all_models, self.related.cos[rows]])
        arrays += self.w_step.checked(rows)
        if self.bayes is not None:
            arrays += self.bayes.checked(rows)
        return arrays

    @staticmethod
    def task_axis(mode: str = FIXED) -> dict:
        """{key of :meth:`state`: axis of the tasks} of every per-task array a block's state
        may hold, whatever the w-step (:func:`.contract.merge_states`); u is per task only
        for tasks learned alone, and the vote's totals, steps and statistic are shared."""
        axes = {"W": 0, "Z": 0, "C": 0, "V": 0, "class_seen": 1, "started": 0}
        if mode == ALONE:
            axes["u"] = 0
        for cls in STEP_CLASSES:
            axes.update({f"wstep_{k}": a for k, a in cls.TASK_AXIS.items()})
        axes.update({f"experts_{k}": a for k, a in ExpertVote.TASK_AXIS.items()})
        axes.update({f"bayes_{k}": a for k, a in MixtureBayes.TASK_AXIS.items()})
        axes["related_rows"] = axes["related_cos"] = 0
        return axes

    def state(self) -> dict:
        """Arrays that fully describe this block's state (for checkpoints and checks)."""
        out = {"W": self.W.copy(), "Z": self.Z.copy(), "C": self.C.copy(), "u": self.u.copy()}
        if self.V is not None:
            out["V"] = self.V.copy()
        if self.started is not None:
            out["started"] = self.started.copy()
        out.update({f"wstep_{k}": v for k, v in self.w_step.state().items()})
        if self.class_seen is not None:
            out["class_seen"] = self.class_seen.copy()
        if self.experts is not None:
            out.update({f"experts_{k}": v for k, v in self.experts.state().items()})
            out.update({f"related_{k}": v for k, v in self.related.state().items()})
        if self.bayes is not None:
            out.update({f"bayes_{k}": v for k, v in self.bayes.state().items()})
        return out

    def load_state(self, state: dict) -> None:
        """Restore a :meth:`state` (the message buffer C keeps its identity)."""
        for key in ("W", "Z", "u"):
            setattr(self, key, np.array(state[key], dtype=np.float64))
        self._inverse = self._gram = None
        self.C[...] = state["C"]
        if self.V is not None:
            self.V = np.array(state["V"], dtype=np.float64)
        if self.started is not None:
            self.started = np.array(state["started"], dtype=bool)
            self._all_started = bool(self.started.all())
        self.w_step.load_state({k[6:]: v for k, v in state.items() if k.startswith("wstep_")})
        if self.class_seen is not None:
            self.class_seen = np.array(state["class_seen"], dtype=np.float64)
        if self.experts is not None:
            self.experts.load_state({k[8:]: v for k, v in state.items() if k.startswith("experts_")})
            self.related.load_state({k[8:]: v for k, v in state.items() if k.startswith("related_")})
        if self.bayes is not None:
            self.bayes.load_state({k[6:]: v for k, v in state.items() if k.startswith("bayes_")})
        if self.mode == FIXED:
            np.multiply(self.u, self._rho_g, out=self._rho_g_u)


class Consensus:
    """The (u, V) step and the Omega update of C-ADMM's server (and of every D-ADMM node),
    for the learners whose tasks are coupled through the consensus (the GIVEN coupling:
    a learned Omega, or the paper variant).

    Call :meth:`step` once per round with all tasks' messages C (K x d, task order). The exact
    step is factored in Omega's basis (:class:`.relationship.ExactStep`), rebuilt only when
    Omega changes: O(K d r) per round, r <= min(K, d), never a K x K matrix.
    """

    NOT_STATE = ("_scratch",)       # for .undo: the Omega update's copy of V

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int):
        self.p = params
        self.K = n_tasks
        self.uv = np.zeros((n_tasks + 1, dim))   # [u; V] of the last step (V: the paper's V_old)
        self._rel = Relationship.identity(n_tasks, min(n_tasks, dim))
        self.rounds = 0                          # consensus steps taken so far
        self._exact = None
        # the buffers the Omega update and the exact step's operator are written into
        self._scratch = np.empty((n_tasks, dim), order="F")
        self._T = np.empty((n_tasks + 1, n_tasks)) if n_tasks <= DENSE_STEP_TASKS else None

    @property
    def u(self) -> np.ndarray:
        return self.uv[0]

    @u.setter
    def u(self, value) -> None:
        self.uv[0] = value

    @property
    def V(self) -> np.ndarray:
        return self.uv[1:]

    @V.setter
    def V(self, value) -> None:
        self.uv[1:] = value

    @property
    def rel(self) -> Relationship:
        return self._rel

    @rel.setter
    def rel(self, value: Relationship) -> None:
        self._rel = value
        self._exact = None

    def _operator(self):
        if self._exact is None:
            p = self.p
            self._exact = ExactStep(self._rel, p.a, p.rho, p.lambda2, p.lambda4, self._T)
        return self._exact

    def step(self, C: np.ndarray):
        """New (u, V) from C (call :meth:`update_relationship` after it, every round).

        Returns
        -------
        u : ndarray, shape (d,)
        V : ndarray, shape (K, d)
            The consensus's own arrays, valid until the next step.
        """
        p = self.p
        if p.variant == "exact":
            # joint minimiser of the augmented Lagrangian over (u, V), docs/ALGORITHMS.md section 2.2
            self._operator().step(C, self.uv)
        else:
            # eq. solution1-2 and eq. solution1-3, the "+" sign as printed
            u, V = paper_step(self._rel, p.a, p.rho, p.lambda2, p.lambda4, C, self.V)
            # The printed "+" sign feeds V back into itself with gain lambda4 / omega_i, so large
            # lambda4 makes V grow geometrically: stop with a reason, not NaN in the results.
            if not np.abs(V).max() < 1e100:
                raise DivergenceError(
                    f"the paper variant's (u, V) step diverged at round {self.rounds + 1} "
                    f"(|V| > 1e100): its printed '+' sign on the lambda4 term makes V grow when "
                    f"lambda4 = {p.lambda4} is large against Omega's eigenvalues; lower --lambda4 "
                    f"or use --variant exact")
            self.uv[0] = u
            self.uv[1:] = V
        self.rounds += 1
        return self.uv[0], self.uv[1:]

    def update_relationship(self, V: np.ndarray | None = None) -> None:
        """The Omega update from V (default: the V of the step just taken), every m-th step.

        Separate from :meth:`step` so that a server can send (u, V) first and update Omega
        while the workers compute: the numbers are the same, the critical path is shorter.
        A D-ADMM node calls it before its step, with the V it gossiped (docs/ALGORITHMS.md section 3).
        """
        p = self.p
        if p.relationship and self.rounds > 0 and self.rounds % p.omega_every == 0:
            self.rel = update_omega(self.V if V is None else V, p.omega_eps, self._rel,
                                    self._scratch)
            # build the next step's operator now: on a server this runs after the reply, while
            # the workers compute, instead of between their messages and the next reply
            if p.variant == "exact":
                self._operator()

    def arrays(self) -> dict:
        """Omega for the results file: its factors, and the K x K matrix where K is small
        (:data:`DENSE_OMEGA_MAX`)."""
        return omega_arrays(self._rel)

    def state(self) -> dict:
        # the factors are stored: recomputing them would change the last bits
        rel = self._rel
        return {"omega_basis": rel.basis.copy(), "omega_values": rel.values.copy(),
                "omega_rest": np.float64(rel.rest), "V": self.V.copy(), "u": self.u.copy(),
                "rounds": np.int64(self.rounds)}

    def load_state(self, state: dict) -> None:
        self.rel = Relationship(np.array(state["omega_basis"], dtype=np.float64),
                                np.array(state["omega_values"], dtype=np.float64),
                                float(state["omega_rest"]))
        self.uv[1:] = state["V"]
        self.uv[0] = state["u"]
        self.rounds = int(state["rounds"])


# Omega is written to results as a K x K matrix up to this many tasks (8 MiB); beyond, as its
# factors only (a K x K matrix at K = 100,000 would be 80 GB)
DENSE_OMEGA_MAX = 1024


def omega_arrays(rel: Relationship) -> dict:
    """{name: array} of Omega for a results file: ``omega_basis``, ``omega_values``,
    ``omega_rest`` (Omega = rest I + basis diag(values - rest) basis^T), and ``omega`` itself
    where K <= :data:`DENSE_OMEGA_MAX`."""
    out = {"omega_basis": rel.basis, "omega_values": rel.values,
           "omega_rest": np.array([rel.rest])}
    if rel.n_tasks <= DENSE_OMEGA_MAX:
        out["omega"] = rel.omega
    return out
