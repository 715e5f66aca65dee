"""Loss (sub)gradients of the online linear learners (spec section 1, plus the squared hinge
of docs/WSTEP.md, whose gradient scales with the missed margin as AROW's step does).

Every loss here has a gradient of the form ``g = coef * x``; the functions return ``coef``
for a whole array of instances at once.  Padding instances (label 0, features 0) used to
vectorise streams of unequal length get ``coef = 0`` from every formula, so an inactive
task contributes a zero gradient without a mask.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

LOSSES = ("hinge", "perceptron", "logistic", "squared-hinge")


def predict(margins: np.ndarray) -> np.ndarray:
    """Labels predicted from margins ``w . x``: ``sign`` with ``sign(0) = +1`` (int8)."""
    return np.where(margins >= 0.0, 1, -1).astype(np.int8)


def gradient_coef(loss: str, y: np.ndarray, margins: np.ndarray,
                  yhat: np.ndarray) -> np.ndarray:
    """Scalar factor of each instance's loss (sub)gradient, ``g = coef * x``.

    Parameters
    ----------
    loss : {"hinge", "perceptron", "logistic", "squared-hinge"}
    y : ndarray
        True labels in {-1, +1}, or 0 for padding (float64 avoids a conversion per round).
    margins : ndarray of float
        ``w_k . x`` for each instance, same shape as ``y``.
    yhat : ndarray of int8
        Predictions, ``predict(margins)``.

    Returns
    -------
    ndarray of float64, same shape as ``y``.
    """
    yf = np.asarray(y, dtype=np.float64)     # no copy when the stream already holds floats
    if loss == "hinge":
        return np.where(yf * margins < 1.0, -yf, 0.0)
    if loss == "perceptron":
        return np.where(yhat != y, -yf, 0.0)
    if loss == "squared-hinge":
        # (1/2) max(0, 1 - y m)^2: the gradient scales with how badly the margin is missed
        return -yf * np.maximum(0.0, 1.0 - yf * margins)
    if loss == "logistic":
        # -y / (1 + exp(y m)) == -y * expit(-y m); expit does not overflow.
        return -yf * expit(-yf * margins)
    raise ValueError(f"unknown loss {loss!r}; choose one of {', '.join(LOSSES)}")
