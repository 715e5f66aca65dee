"""A task block's steps with ``--coordinates nonzero`` (large d): every step of a round's tasks
only at the (task, coordinate) pairs where their instances are non-zero, in O(non-zeros)
(docs/ALGORITHMS.md section 2.1, *Large d*). :class:`PairSteps` is a part of
:class:`.admm.TaskBlock`, on its arrays.
"""
from __future__ import annotations

import numpy as np

from ..data.sparse import SparseRows, rows_dense
from .admm_params import ALONE, FIXED_OMEGA
from .experts import MOMENT, moment_change
from .losses import descent_coef, predict


class PairSteps:
    """The pair-wise steps of :class:`.admm.TaskBlock` (its arrays and helpers)."""

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
        if self.mode == FIXED_OMEGA:
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
            self.delta_H = moment_change(old_rows, self.W[act])
        self.W_pairs = (rows, cols, new)
        if self.bayes is not None:
            self.bayes.learn(rows_dense(X), y, active)
        C = np.multiply(new, self._rho)
        C += Z
        if self.mode == FIXED_OMEGA:
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
        elif self.mode == FIXED_OMEGA:
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

