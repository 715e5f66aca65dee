"""Metrics of docs/ALGORITHMS.md section 6 on hand-made mistakes and predictions."""
import numpy as np
import pytest

from omtl_mpi import metrics


def test_curve_with_unequal_streams():
    # task 0: mistakes 1, 0, 1, 0; task 1 (ends after 2 rounds): 0, 1
    mistakes = np.array([1, 0, 1, 0, 0, 1], dtype=np.int8)
    cum0 = [1, 1 / 2, 2 / 3, 2 / 4]
    cum1 = [0, 1 / 2, 1 / 2, 1 / 2]         # ended: stays at its final rate
    np.testing.assert_allclose(metrics.mean_curve(mistakes, [4, 2], batch=1, rounds=4),
                               (np.array(cum0) + cum1) / 2)


def test_curve_with_minibatches():
    # 5 instances in rounds of 2: after each round 1/2, 2/4, 3/5
    np.testing.assert_allclose(metrics.mean_curve(np.array([1, 0, 1, 0, 1], dtype=np.int8), [5],
                                                  batch=2, rounds=3), [1 / 2, 2 / 4, 3 / 5])


def test_summary_per_task():
    mistakes = np.array([1, 0, 1, 0, 0, 1], dtype=np.int8)
    y = np.array([1, 1, -1, -1, 1, -1], dtype=np.int8)
    yhat = np.where(mistakes == 1, -y, y)
    conf = metrics.confusion(yhat, y, [4, 2])
    s = metrics.summarise(mistakes, [4, 2], 1, 4, conf)
    np.testing.assert_allclose(s["per_task_error"], [0.5, 0.5])
    assert s["mean_error"] == 0.5 and s["mistakes_total"].tolist() == [2, 1]


def test_rounds_to_accuracy():
    curve = np.array([0.5] * 9 + [0.3, 0.2, 0.05, 0.04])
    assert metrics.rounds_to_accuracy(curve, 0.8) == 11
    assert metrics.rounds_to_accuracy(curve, 0.95) == 12
    assert metrics.rounds_to_accuracy(curve, 0.99) is None
    assert metrics.rounds_to_accuracy(np.array([0.0] * 12), 0.9) == 10   # never before round 10


def test_balanced_error_f1():
    y = np.array([1, 1, -1, -1, -1, -1, -1, -1, -1], dtype=np.int8)
    yhat = np.array([1, -1, -1, 1, -1, -1, 1, -1, -1], dtype=np.int8)
    conf = metrics.confusion(yhat, y, [4, 5])
    np.testing.assert_array_equal(conf, [[1, 1, 1, 1], [0, 1, 0, 4]])
    np.testing.assert_allclose(metrics.balanced_error(conf), [0.5, 0.2])  # no positives: FPR only
    np.testing.assert_allclose(metrics.f1_positive(conf), [0.5, 0.0])


def test_always_negative_on_imbalanced_data():
    y = np.array([1] * 6 + [-1] * 94, dtype=np.int8)
    conf = metrics.confusion(-np.ones_like(y), y, [100])
    assert metrics.balanced_error(conf)[0] == pytest.approx(0.5)
    assert metrics.f1_positive(conf)[0] == 0.0
