"""The ADMM learners' hyper-parameters (:class:`AdmmParams`, validated once) and the facts read
from them: the coupling of a block's tasks, the coordinates a round steps, the class weights.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import ClassVar

from ..errors import ConfigError, UserError
from .losses import LOSSES
from .wsteps import (AROW_DIAGONAL_ABOVE, AROW_DIAGONAL_W_STEP_R_PER_MEAN_SQ_NORM, AROW_FULL_MAX,
                     AROW_W_STEP_R_PER_MEAN_SQ_NORM, COVARIANCES, W_STEP_CLASSES, arow_form)

VARIANTS = ("exact", "paper")
W_STEPS = tuple(W_STEP_CLASSES)
# --coordinates (docs/ALGORITHMS.md section 2.1, *Large d*); auto: nonzero above LARGE_DIM
# weights with a diagonal w-step, a d above AROW's diagonal one: below it a diagonal round of
# every coordinate costs little, and nonzero only approximates the paper's step
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

    ``eta = None`` is filled in by :meth:`resolved`; ``w_step`` picks the Bregman divergence of
    the w-step (docs/ALGORITHMS.md section 2.1). Each field's metadata holds its option's help
    (:mod:`omtl_mpi.options`).
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
                f"features' scale; {AROW_DIAGONAL_W_STEP_R_PER_MEAN_SQ_NORM} times with the "
                "diagonal covariance (docs/ALGORITHMS.md section 2.1).", "none_text": "auto"})
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

        def one_of(name, choices):
            value = getattr(self, name)
            if value not in choices:
                problems.append(f"--{name.replace('_', '-')} must be one of {', '.join(choices)}, "
                                f"got {value!r}")
            return value in choices

        for name in ("rho", "lambda1", "lambda2", "delta", "arow_r"):
            value = getattr(self, name)
            if value is None and name == "arow_r":      # auto
                continue
            if finite(name, value) and value <= 0:
                problems.append(f"--{name.replace('_', '-')} must be > 0, got {value!r}")
        one_of("w_step", W_STEPS)
        one_of("arow_covariance", COVARIANCES)
        if (one_of("coordinates", COORDINATES) and self.coordinates == "nonzero"
                and self.w_step == "arow" and self.arow_covariance == "full"):
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
        one_of("variant", VARIANTS)
        one_of("loss", LOSSES)
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
    FIXED_FIELDS: ClassVar[tuple] = ()
    FIXED_FIELDS_WHY: ClassVar[str] = ""

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
        return cls(**{**{k: v for k, v in PAPER.items() if k not in cls.FIXED_FIELDS}, **changes})

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
    return "all" if dim <= LARGE_DIM or full else "nonzero"


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
    """ConfigError unless every field in ``type(params).FIXED_FIELDS`` has its class default:
    for the learners built on these parameters that fix some of them (``FIXED_FIELDS_WHY``
    says why)."""
    cls = type(params)
    wrong = [f"--{f.name.replace('_', '-')}" for f in fields(cls)
             if f.name in cls.FIXED_FIELDS and getattr(params, f.name) != f.default]
    if wrong:
        raise ConfigError(f"{', '.join(wrong)} cannot be set: {cls.FIXED_FIELDS_WHY} "
                          "(see 'omtl-mpi algos')")


# How a block's task parts v_k come about (TaskBlock's ``mode``, :func:`coupling`):
# Omega fixed at I/K, exact step: v_k = f (c_k - rho u), from the task's own c_k and u
FIXED_OMEGA = "fixed"
# a learned Omega (or the paper variant) couples the tasks: V comes from the consensus step
GIVEN = "given"
ALONE = "alone"     # every task its own u_k and v_k (ADMM-Single)


def coupling(params) -> str:
    """FIXED_OMEGA where every task's v_k follows from its own message and the shared u (Omega
    fixed at I/K with the exact step: the defaults), else GIVEN."""
    return FIXED_OMEGA if params.variant == "exact" and not params.relationship else GIVEN

