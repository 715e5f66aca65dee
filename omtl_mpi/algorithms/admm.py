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

import numpy as np

from ..data.sparse import SparseRows, rows_dense
from . import mixture
# the ADMM learners' public names, from the modules that hold them (re-exported)
from .admm_params import (ADAPTIVE_ETA, ALONE, COORDINATES, FIXED_OMEGA, GIVEN,  # noqa: F401
                          LARGE_DIM, PAPER, VARIANTS, W_STEPS, AdmmParams, DivergenceError,
                          class_weights, coordinates_of, coupling, fixed_fields)
from .bayes import EmpiricalBayes
from .consensus import DENSE_OMEGA_MAX, Consensus, omega_arrays  # noqa: F401
from .experts import (BAYES, BAYES_HANDOVER, MODELS, MOMENT, ROWS, ExpertVote, Related,
                      inverse_norms, moment, vote_experts)
from .losses import descent_coef, predict
from .mixture import MixtureBayes
from .pair_steps import PairSteps
from .relationship import ExactStep, Relationship
from .wsteps import STEP_CLASSES, make_w_step


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


class TaskBlock(PairSteps):
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
    mode : {FIXED_OMEGA, GIVEN, ALONE}
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

    def __init__(self, params: AdmmParams, n_tasks: int, dim: int, mode: str = FIXED_OMEGA,
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
        self.V = None if mode == FIXED_OMEGA else np.zeros((n_tasks, dim))
        self.started = None if mode == ALONE else np.zeros(n_tasks, dtype=bool)
        self._all_started = False           # every task has started (a shortcut)
        self._rho = np.array(params.rho)               # a cheaper numpy operand than a float
        if mode == FIXED_OMEGA:
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

    # for .undo: constants, and what a round computes for its own use (the deltas its worker
    # sends, the pairs of its sparse step) before anything reads it
    NOT_STATE = ("_rho", "_f", "_rho_f", "_g", "_rho_g", "_ones", "_pairs", "delta_pairs",
                 "W_pairs", "delta_C", "delta_mistakes", "delta_H", "_active")

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
        if self.mode == FIXED_OMEGA:
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
        coef = descent_coef(p.loss, y, margins, own)
        if self.class_seen is not None:
            coef = coef * self._class_weights(y, active)
        D = descent(X, coef, inv_count, sparse)
        # eq. solution1-1: the Bregman-proximal linearised w-step (wsteps.py), D = -g, with
        # R = rho (u + v_k) - z_k of the last consensus step
        Z = self.Z[active]
        if self.mode == FIXED_OMEGA:
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
        if self.mode == FIXED_OMEGA:
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
            bayes_margins = out[row[BAYES]]
            bayes_margins[...] = self.bayes.margins(rows_dense(X), active, store)
            # a long stream's own model overtakes the posterior (a least-squares fit of the
            # labels): from BAYES_HANDOVER instances on, the expert votes with the task's model
            long = self.bayes.n[active] >= BAYES_HANDOVER
            bayes_margins[:, long] = margins[:, long]
        return out

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
        start = self._starting(W, active)
        # predict_and_step's margins, the same calls
        margins = X.margins(start) if isinstance(X, SparseRows) else np.vecdot(start, X)
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
        elif self.mode == FIXED_OMEGA:
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
        V = self.task_parts(slice(None)) if self.mode == FIXED_OMEGA else self.V
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
    def task_axis(mode: str = FIXED_OMEGA) -> dict:
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
        if self.mode == FIXED_OMEGA:
            np.multiply(self.u, self._rho_g, out=self._rho_g_u)


class BlockRole:
    """A role whose learning state is one :class:`TaskBlock`, ``self.block``."""

    def state(self) -> dict:
        return self.block.state()

    def load_state(self, state: dict) -> None:
        self.block.load_state(state)

    def checked(self, rows=None) -> list:
        """The arrays of the tasks ``rows`` (None: all) and the shared ones, to be finite."""
        return self.block.checked(rows)
