"""Loss (sub)gradients of the online linear learners (docs/ALGORITHMS.md section 1, plus the
squared hinge of section 2.1, whose gradient scales with the missed margin as AROW's step does).

Every loss here has a gradient of the form ``g = coef * x``; the functions return ``coef``
(or ``-coef``, the descent direction that the ADMM w-step adds) for a whole array of
instances.  Padding instances (label 0, features 0) used to vectorise streams of unequal
length get ``coef = 0`` from every formula, so an inactive task contributes a zero gradient
without a mask.
"""
from __future__ import annotations

import functools

import numpy as np

LOSSES = ("hinge", "perceptron", "logistic", "squared-hinge")

# 0-d array operands: numpy handles them faster than Python floats (every round, every task)
_ZERO, _ONE = np.array(0.0), np.array(1.0)


@functools.cache
def _expit():
    """scipy.special.expit, imported on first use: importing scipy.special costs every process
    more CPU than numpy does, and only the logistic loss needs it."""
    from scipy.special import expit
    return expit


def predict(margins: np.ndarray) -> np.ndarray:
    """Predictions from margins ``w . x``: True for +1, False for -1 (``sign(0) = +1``);
    booleans, one numpy call: the runtime turns them into int8 labels once, at the end."""
    return margins >= _ZERO


def descent_coef(loss: str, y: np.ndarray, margins: np.ndarray,
                 positive: np.ndarray) -> np.ndarray:
    """Scalar factor (float64, the shape of ``y``) of each instance's negative loss
    (sub)gradient, ``-g = coef * x``, of ``loss`` (one of :data:`LOSSES`) from the labels ``y``
    (-1/+1, 0 for padding), the margins ``w_k . x`` and the predictions ``positive``
    (``predict(margins)``)."""
    if loss == "hinge":
        return np.where(y * margins < _ONE, y, _ZERO)
    if loss == "perceptron":
        return y * ((y > 0.0) != positive)      # y on a mistake (padding: y = 0)
    if loss == "squared-hinge":
        # (1/2) max(0, 1 - y m)^2: the gradient scales with how badly the margin is missed
        return y * np.maximum(0.0, 1.0 - y * margins)
    if loss == "logistic":
        # y / (1 + exp(y m)) == y * expit(-y m); expit does not overflow.
        return y * _expit()(-y * margins)
    raise ValueError(f"unknown loss {loss!r}; choose one of {', '.join(LOSSES)}")


def gradient_coef(loss: str, y: np.ndarray, margins: np.ndarray,
                  positive: np.ndarray) -> np.ndarray:
    """Scalar factor of each instance's loss (sub)gradient, ``g = coef * x``
    (arguments as :func:`descent_coef`)."""
    return -descent_coef(loss, np.asarray(y, dtype=np.float64), margins, positive)
