"""Write a file under a temporary name and rename it into place, so a crash or an error never
leaves a half-written file under the final name."""
from __future__ import annotations

import os
from contextlib import contextmanager


@contextmanager
def atomic_path(path):
    """Yield a temporary path next to ``path``; on success rename it to ``path``, else delete it."""
    path = str(path)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
