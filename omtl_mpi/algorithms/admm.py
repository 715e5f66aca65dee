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

from ..errors import ConfigError, UserError
from .experts import ExpertVote
from .losses import LOSSES, descent_coef, predict
from .relationship import Relationship, consensus_matrix, pseudo_inverse, update_omega
from .wsteps import AROW_W_STEP_R_PER_MEAN_SQ_NORM, W_STEP_CLASSES, make_w_step

VARIANTS = ("exact", "paper")
W_STEPS = tuple(W_STEP_CLASSES)
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
                "--preset paper turns on). Off, Omega stays I/K (the paper's ablation 'W/O "
                "RL'): the default, since with the experts' vote learning Omega changed the "
                "error by less than the seeds' spread, at a K x K eigendecomposition per "
                "round (docs/GUIDE.md)."})
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
    class_weight: str = field(default="none", metadata={
        "help": "Weight of each instance's loss by its class. none: 1; balanced: n / (2 n_y), "
                "with n_y the task's instances of class y seen before this round (plus one, "
                "so the first round has weight 1): scikit-learn's 'balanced' without "
                "look-ahead; a number c > 0: c for +1, 1 for -1.", "metavar": "none|balanced|C"})
    experts: bool = field(default=True, metadata={
        "help": "Predict each task by a vote of three experts (its multi-task model, the shared "
                "u and the related tasks' models) weighted by their mistakes on all tasks, so that "
                "the sharing adapts to how related the tasks are (docs/ALGORITHMS.md section 2.6); "
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


class TaskBlock:
    """Worker-side ADMM state and steps for a contiguous block of tasks.

    Holds ``W`` and ``Z`` (kb x d), the message ``C`` (kb x d, rewritten in place every round)
    and the latest ``u`` (d,) and ``V`` rows (kb x d) of the consensus step.  All steps are
    vectorised over the block and the mini-batch, and written to make few numpy calls: at
    K = 5, d = 9 each call costs more than its arithmetic (docs/DESIGN.md, "The round's hot path").

    Parameters
    ----------
    params : AdmmParams
        With ``eta`` resolved.
    n_tasks, dim : int
    shared_u : bool
        One u for the block (multi-task) or one per task (tasks learned alone).
    message : ndarray, shape (n_tasks, dim), optional
        Where to write ``C`` every round (a view of D-ADMM's table, so that no copy is needed);
        by default a buffer of the block's own.  Either way it is the same array every round,
        which lets MPI bind a persistent request to it.
    total_tasks : int, optional
        Every task of the run (K), for the experts' vote; the block's own by default.
    """

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, shared_u: bool = True,
                 message: np.ndarray | None = None, total_tasks: int | None = None):
        if params.eta is None:
            raise ValueError("resolve eta (AdmmParams.resolved) before building a TaskBlock")
        self.p = params
        self.W = np.zeros((n_tasks, dim))
        self.Z = np.zeros((n_tasks, dim))
        self.u = np.zeros(dim) if shared_u else np.zeros((n_tasks, dim))
        self.V = np.zeros((n_tasks, dim))
        self.C = np.zeros((n_tasks, dim)) if message is None else message
        self._rY = np.zeros((n_tasks, dim))            # rho (u + v_k), the w-step's target
        self._rho = np.array(params.rho)               # a cheaper numpy operand than a float
        self.w_step = make_w_step(params, n_tasks, dim)
        self.w_step.prepare(self._rY, self.Z)
        # --experts: what is predicted is the vote of experts.py; the ADMM steps are the same
        self.experts = (ExpertVote(n_tasks, dim, total_tasks or n_tasks) if params.experts
                        else None)
        # One task, the paper's setting (a rank per task): the loss factor of a single instance
        # is taken in Python floats, with the same IEEE operations as descent_coef's arrays,
        # which saves three numpy calls a round.  Only for the w-step that does not read it.
        self._scalar_loss = (params.loss if n_tasks == 1 and params.w_step == "euclid"
                             and params.loss in ("hinge", "perceptron")
                             and params.class_weight == "none" else None)
        # --class-weight: each task's instances of class -1 and +1 seen so far
        self._weighted = class_weights(params.class_weight)
        self.class_seen = np.zeros((2, n_tasks)) if self._weighted != "none" else None

    def predict_and_step(self, X: np.ndarray, y: np.ndarray, inv_count: np.ndarray):
        """Predict a round's instances, then take the w-step and write the message C.

        Parameters
        ----------
        X : ndarray, shape (B, kb, d)
            The round's mini-batch for every task of the block (zero rows for padding).
        y : ndarray of float, shape (B, kb)
            Labels, 0 for padding.
        inv_count : ndarray, shape (kb,)
            1 / (number of real instances of each task in this batch), 1 where there are none.

        Returns
        -------
        positive : ndarray of bool, shape (B, kb)
            The predictions made before the labels were revealed (True for +1).
        C : ndarray, shape (kb, d)
            ``c_k = z_k + rho w_k`` for each task, the message to the consensus step (the
            block's own buffer: read it before the next round).
        """
        p = self.p
        margins = np.vecdot(self.W, X)
        positive = predict(margins)
        if self.experts is not None:
            np.copyto(self.experts.models[0], self.W)
            vote = self.experts.predict(X)
            self.experts.update(y)
        if self._scalar_loss is not None and X.shape[0] == 1:
            m, label = margins.item(), y.item()
            if self._scalar_loss == "hinge":       # np.where(y m < 1, y, 0)
                factor = label if label * m < 1.0 else 0.0
            else:                                  # y ((y > 0) != (m >= 0)), -0.0 included
                factor = label * ((label > 0.0) != (m >= 0.0))
            D = X[0] * factor
            coef = None                            # the Euclidean step does not read it
        else:
            coef = descent_coef(p.loss, y, margins, positive)
            if self.class_seen is not None:
                coef = coef * self._class_weights(y)
            if X.shape[0] == 1:     # with B = 1 every count is 1 (padding has a zero gradient)
                D = X[0] * coef.T
            else:
                D = np.einsum("bk,bkd->kd", coef, X)
                D *= inv_count[:, None]
        # eq. solution1-1: the Bregman-proximal linearised w-step (wsteps.py), D = -g
        self.W = W = self.w_step.step(self.W, D, X, coef, inv_count)
        C = self.C
        np.multiply(W, self._rho, out=C)
        C += self.Z
        return (positive if self.experts is None else vote), C

    def decide(self, X: np.ndarray) -> np.ndarray:
        """The decision values (B, kb) of ``X`` (B, kb, d) with the block as it is, changing
        nothing: ``decide(X) >= 0`` is what :meth:`predict_and_step` predicts on the same X.

        Without ``--experts`` the margins ``w_k . x``; with them the weighted vote sum of
        :meth:`.experts.ExpertVote.decide`, with W as the first expert's model (as the step
        sets it).
        """
        if self.experts is None:
            return np.vecdot(self.W, X)           # predict_and_step's margins, the same call
        return self.experts.decide(X, self.W)

    def _class_weights(self, y: np.ndarray) -> np.ndarray:
        """Every instance's class weight (B, kb), from the counts before this round; then the
        round's labels are counted."""
        seen = self.class_seen
        if self._weighted == "balanced":
            w = (seen.sum(axis=0) + 2.0) / (2.0 * (seen + 1.0))      # rows: class -1, +1
            weight = np.where(y > 0.0, w[1], w[0])
        else:
            weight = np.where(y > 0.0, self._weighted, 1.0)
        seen[0] += (y < 0.0).sum(axis=0)
        seen[1] += (y > 0.0).sum(axis=0)
        return weight

    def dual_step(self, u: np.ndarray, V: np.ndarray, related: np.ndarray | None = None,
                  totals: np.ndarray | None = None) -> None:
        """Take the consensus (u, V rows of this block) and the z-step (eq. solution1-4).

        ``u`` and ``V`` are kept by reference, not copied: they are the consensus message,
        which stays unchanged until the next round (read them between rounds). With
        ``--experts``: ``related``, this block's rows of :func:`.experts.related_models`, and
        ``totals``, every task's experts' mistakes (copied).
        """
        self.u, self.V = u, V
        if self.experts is not None:
            if related is None or totals is None:
                raise ValueError("with --experts, dual_step needs the related models and totals")
            self.experts.models[1] = u
            self.experts.models[2] = related
            self.experts.set_totals(totals)
        rY = self._target()
        # z + rho (w - u - v_k), with z + rho w the message C just sent
        np.subtract(self.C, rY, out=self.Z)
        self.w_step.prepare(rY, self.Z)

    def _target(self) -> np.ndarray:
        """``rho (u + v_k)`` for the block, in the block's own buffer."""
        rY = np.add(self.V, self.u, out=self._rY)
        rY *= self._rho
        return rY

    @staticmethod
    def task_axis(shared_u: bool = True) -> dict:
        """{key of :meth:`state`: axis of the tasks} of every per-task array a block's state
        may hold, whatever the w-step (:func:`.contract.merge_states`); u is per task only
        where each task has its own (``shared_u=False``), and the vote's totals and steps are
        shared."""
        axes = {"W": 0, "Z": 0, "V": 0, "class_seen": 1}
        if not shared_u:
            axes["u"] = 0
        for cls in W_STEP_CLASSES.values():
            axes.update({f"wstep_{k}": a for k, a in cls.TASK_AXIS.items()})
        axes.update({f"experts_{k}": a for k, a in ExpertVote.TASK_AXIS.items()})
        return axes

    def state(self) -> dict:
        """Arrays that fully describe this block's state (for checkpoints and checks)."""
        out = {"W": self.W.copy(), "Z": self.Z.copy(), "u": np.array(self.u), "V": np.array(self.V)}
        out.update({f"wstep_{k}": v for k, v in self.w_step.state().items()})
        if self.class_seen is not None:
            out["class_seen"] = self.class_seen.copy()
        if self.experts is not None:
            out.update({f"experts_{k}": v for k, v in self.experts.state().items()})
        return out

    def load_state(self, state: dict) -> None:
        """Restore a :meth:`state` (the message buffer C keeps its identity)."""
        for key in ("W", "Z", "u", "V"):
            setattr(self, key, np.array(state[key], dtype=np.float64))
        self.w_step.load_state({k[6:]: v for k, v in state.items() if k.startswith("wstep_")})
        if self.class_seen is not None:
            self.class_seen = np.array(state["class_seen"], dtype=np.float64)
        if self.experts is not None:
            self.experts.load_state({k[8:]: v for k, v in state.items() if k.startswith("experts_")})
        # what dual_step derived from (u, V, Z): the same operations give the same bits
        self.w_step.prepare(self._target(), self.Z)


class Consensus:
    """The (u, V) step and the Omega update of C-ADMM's server (and of every D-ADMM node).

    Call :meth:`step` once per round with all tasks' messages C (K x d, task order).  For the
    exact variant the step is one matrix product, ``[u; V] = M C`` (:func:`consensus_matrix`),
    with M rebuilt only when Omega changes.
    """

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int):
        self.p = params
        self.K = n_tasks
        self.uv = np.zeros((n_tasks + 1, dim))   # [u; V] of the last step (V: the paper's V_old)
        self._rel = Relationship.identity(n_tasks)
        self.rounds = 0                          # consensus steps taken so far
        self._operator = None                    # M (exact) or the lambda4 term's map (paper)

    @property
    def u(self) -> np.ndarray:
        return self.uv[0]

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
        self._operator = None

    def _cached_operator(self) -> np.ndarray:
        if self._operator is None:
            p = self.p
            if p.variant == "exact":
                self._operator = consensus_matrix(self._rel, p.a, p.rho, p.lambda2, p.lambda4)
            else:
                pinv = pseudo_inverse(self._rel)
                self._operator = (p.lambda4 / 2.0) * (pinv + pinv.T)
        return self._operator

    def step(self, C: np.ndarray):
        """New (u, V) from C (call :meth:`update_relationship` after it, every round).

        Returns
        -------
        u : ndarray, shape (d,)
        V : ndarray, shape (K, d)
            Views of :attr:`uv`, valid until the next step.
        """
        p, K = self.p, self.K
        op = self._operator if self._operator is not None else self._cached_operator()
        if p.variant == "exact":
            # joint minimiser of the augmented Lagrangian over (u, V), docs/ALGORITHMS.md section 2.2
            np.dot(op, C, out=self.uv)
        else:
            a = p.a
            # eq. solution1-2 and eq. solution1-3, the "+" sign as printed
            u = a * C.sum(axis=0) / (a * (p.lambda2 + p.rho * K) + p.lambda2 * p.rho)
            V = (p.lambda2 / (p.lambda2 * (a + p.rho) + p.rho * K * a)) * C + op @ self.V
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
            self.rel = update_omega(self.V if V is None else V, p.omega_eps, self._rel)
            # build the next step's operator now: on a server this runs after the reply, while
            # the workers compute, instead of between their messages and the next reply
            self._cached_operator()

    @property
    def omega(self) -> np.ndarray:
        return self._rel.omega

    def state(self) -> dict:
        # the eigendecomposition is stored too: recomputing it would change the last bits
        return {"omega_evals": self._rel.evals.copy(), "omega_evecs": self._rel.evecs.copy(),
                "V": self.V.copy(), "u": self.u.copy(),
                "rounds": np.int64(self.rounds)}

    def load_state(self, state: dict) -> None:
        self.rel = Relationship(np.array(state["omega_evals"], dtype=np.float64),
                                np.array(state["omega_evecs"], dtype=np.float64))
        self.uv[1:] = state["V"]
        self.uv[0] = state["u"]
        self.rounds = int(state["rounds"])
