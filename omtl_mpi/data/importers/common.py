"""Helpers shared by the importers: label mapping and clear errors."""
from __future__ import annotations

import numpy as np

from ...errors import DataError


def binary_labels(values, where: str, notices: list) -> np.ndarray:
    """Labels as int8 -1/+1: -1/+1 kept, 0/1 mapped (0 -> -1); any other two values: the larger
    becomes +1, with a notice. More than two values is an error naming ``where``."""
    v = np.asarray(values)
    uniq = np.unique(v)
    if set(uniq.tolist()) <= {-1, 1}:
        return v.astype(np.int8)
    if set(uniq.tolist()) <= {0, 1}:
        return np.where(v == 1, 1, -1).astype(np.int8)
    if len(uniq) == 2:
        notices.append(f"{where}: labels {uniq[0]!r}/{uniq[1]!r} mapped to -1/+1")
        return np.where(v == uniq[1], 1, -1).astype(np.int8)
    raise DataError(f"{where}: labels must take two values (for -1/+1), found {len(uniq)}: "
                    f"{', '.join(map(str, uniq[:5]))}{' ...' if len(uniq) > 5 else ''}")


def require_file(path, what: str) -> None:
    import os
    if not os.path.isfile(path):
        raise DataError(f"{path}: {what} not found")
