"""The check that one process equals MPI: ``run_streams`` under ``mpiexec``, several tasks on a
rank, gives the predictions, model and learner of one process."""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

from ..learners import first_difference
from .common import _Skip, _streams


def check_one_process_equals_mpi(m):
    """run_streams on 3 ranks (the learner's nodes for a neighbour learner) predicts as in
    one process (the learner's module is imported by every rank)."""
    from ..algorithms import registry
    from ..streams import run_streams
    spec = registry.get(m.algo)
    module = (spec.worker or spec.node).__module__
    if module == "__main__":
        raise _Skip("the learner is defined in the script itself, which MPI ranks cannot "
                    "import: put it in a module (a .py file) that the script imports")
    X, y = _streams(m, longest=30)
    params = {k: v for k, v in m.get_params().items()
              if k not in ("n_tasks", "n_features", "task_key", "default_task")}
    K = m.n_tasks
    # fewer holders than tasks, so that some rank holds several (a role that ignores which of
    # its tasks are active passes with one task a rank)
    if spec.pattern == "neighbours":
        ranks = params.get("nodes") or (K if spec.one_task_per_node else max(2, K - 1))
        params["nodes"] = ranks
    elif spec.pattern == "server":
        ranks = 1 + max(1, min(2, K - 1))
    else:
        ranks = max(1, min(2, K - 1))
    params.pop("rounds")            # a run knows its length (eta = sqrt(T) is derived from it)
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.access(mpiexec, os.X_OK):
        raise _Skip("no mpiexec next to this Python")
    local = run_streams(X, y, m.algo, **params)
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(os.path.join(tmp, "in.npz"), *X, *y)
        script = (
            "import sys, json, numpy as np, importlib\n"
            f"importlib.import_module({module!r})\n"
            "import omtl_mpi\n"
            f"z = np.load({os.path.join(tmp, 'in.npz')!r})\n"
            f"a = [z[f'arr_{{i}}'] for i in range({2 * K})]\n"
            f"res = omtl_mpi.run_streams(a[:{K}], a[{K}:], {m.algo!r}, "
            f"**json.loads({json.dumps(params)!r}))\n"
            f"res is None or res.save({os.path.join(tmp, 'out.h5')!r})\n"
            f"res is None or res.learner.save({os.path.join(tmp, 'learner.h5')!r})\n")
        env = {**os.environ, "MPIEXEC_TIMEOUT": "120", "PYTHONPATH": os.pathsep.join(sys.path)}
        try:
            done = subprocess.run([mpiexec, "-n", str(ranks), sys.executable, "-m", "mpi4py", "-c",
                                   script], capture_output=True, text=True, timeout=150, env=env)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the MPI run on {ranks} ranks did not end within 150 s") from None
        assert done.returncode == 0, f"the MPI run failed: {_last_error(done.stderr)}"
        from ..learners import load
        from ..streams import load_result
        remote = load_result(os.path.join(tmp, "out.h5"))
        fitted = load(os.path.join(tmp, "learner.h5"))
    for k in range(K):
        assert np.array_equal(local.predictions[k], remote.predictions[k]), \
            f"task {k}: predictions on {ranks} ranks differ from one process"
    for key, value in local.model.items():
        assert np.allclose(value, remote.model[key], rtol=0, atol=1e-10), \
            f"{key} on {ranks} ranks differs from one process"
    # the learner gathered from the ranks (its blocks joined by TASK_AXIS) is the one of one
    # process: the same state, and it decides alike
    where = first_difference(fitted.state_dict()["state"], local.learner.state_dict()["state"],
                             "state", _close)
    assert where is None, (f"the learner gathered from {ranks} ranks differs from one process's "
                           f"at {where} (is TASK_AXIS right?)")


def _close(a, b, where: str) -> str | None:
    x, z = np.asarray(a), np.asarray(b)
    return where if x.shape != z.shape or not np.allclose(x, z, rtol=0, atol=1e-10) else None


def _last_error(stderr: str) -> str:
    """The line of a rank's traceback that says what went wrong (the last ``...Error: ...``)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    found = [line for line in lines if re.match(r"^[\w.]*(Error|Exception)\b", line)]
    return found[-1] if found else (lines[-1] if lines else "no message")
