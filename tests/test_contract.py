"""The role contract (omtl_mpi.algorithms.contract) holds for every registered learner.

* ``decide(X) >= 0`` is, bit for bit, what the round on X then predicts, and decide changes
  no state;
* the state of one block holding every task equals the merged states of several blocks
  (``TASK_AXIS``, ``merge_states``);
* ``register`` refuses role classes that break the contract, in one line.
"""
import numpy as np
import pytest

from conftest import layout_of
from omtl_mpi.algorithms import REGISTRY
from omtl_mpi.algorithms.admm import AdmmParams
from omtl_mpi.algorithms.contract import merge_states
from omtl_mpi.algorithms.independent import PaNode
from omtl_mpi.algorithms.registry import Algorithm, register
from omtl_mpi.algorithms.server_baselines import MtPerceptronWorker
from omtl_mpi.comm.clock import PhaseClock
from omtl_mpi.data.rounds import rounds_needed
from omtl_mpi.engine import build
from omtl_mpi.engine.placement import task_blocks
from omtl_mpi.engine.schedule import Hooks

# every learner with its defaults, and the ADMM learners' other prediction path (no vote)
CASES = [(name, None) for name in sorted(REGISTRY)] + [
    ("c-admm", AdmmParams(experts=False, class_weight="balanced")),
    ("d-admm", AdmmParams(experts=False, w_step="adagrad")),
]
SPLIT = sorted(name for name, algo in REGISTRY.items()
               if (algo.worker or algo.node).TASK_AXIS is not None)


def _case_id(case):
    name, params = case
    return name if params is None else f"{name}-no-experts"


def _same_state(a: dict, b: dict) -> bool:
    """Two states hold the same keys and arrays, bit for bit."""
    return a.keys() == b.keys() and all(
        np.asarray(a[k]).dtype == np.asarray(b[k]).dtype and np.asarray(a[k]).shape == np.asarray(b[k]).shape
        and np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes() for k in a)


def _setup(name, streams, batch, params=None, holders=None):
    """What support.drive.simulate builds: resolved parameters, blocks, topology, batches."""
    X_list, y_list = streams
    algo = REGISTRY[name]
    K, d = len(X_list), X_list[0].shape[1]
    T = rounds_needed([len(y) for y in y_list], batch)
    resolved = (params if params is not None else algo.params()).resolved(T)
    topo = None
    if holders is None:
        holders = 1 if algo.pattern != "neighbours" else K
    if algo.pattern == "neighbours":
        from omtl_mpi.topology import load_topology
        topo = load_topology("ring", holders)
    blocks = task_blocks(K, holders)
    batches = [layout_of(X_list[a:b], y_list[a:b], batch, T, d) for a, b in blocks]
    return algo, resolved, K, d, T, blocks, topo, batches


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_decide_is_the_next_prediction_and_changes_nothing(case, batch, unequal_streams):
    """Through the runtime's own round loops: before every round, each holder's decide on
    its block's instances, then the round's predictions."""
    name, params = case
    algo, resolved, K, d, T, blocks, topo, batches = _setup(name, unequal_streams, batch, params)
    roles = build(algo, resolved, K, d, topology=topo)
    assert roles.blocks == blocks
    decided = [np.zeros(b.n_slots, dtype=bool) for b in batches]

    def decide(t):
        for i, (holder, batch_) in enumerate(zip(roles.holders, batches)):
            before = holder.state()
            X, y, _, active = batch_[t]
            values = holder.decide(X, active)
            assert values.dtype == np.float64 and values.shape == y.shape
            decided[i][batch_.slot_ptr[t]:batch_.slot_ptr[t + 1]] = (values >= 0.0).reshape(-1)
            assert _same_state(before, holder.state()), f"{name}: decide changed the state"

    decide(0)
    # a "checkpoint" after every round but the last: the next round's decision values
    roles.run(batches, PhaseClock(T), Hooks(checkpoint=(1, decide)))
    for i, (made, want) in enumerate(zip(roles.preds, decided)):
        wrong = np.argwhere(made != want)
        assert not len(wrong), f"{name}: holder {i} decided otherwise than it predicted at slot " \
                               f"{tuple(wrong[0])}"


def _drive(algo, params, K, d, blocks, batches, T):
    """Run every round with one holder per block, as the runtime's loops do (a server and its
    workers, the workers' messages concatenated in rank order; or nodes with no exchange),
    checking decide on the way; returns the holders."""
    if algo.pattern == "server":
        holders = [algo.worker(params, K, d, a, b) for a, b in blocks]
        server = algo.server(params, K, d, blocks)
        every = getattr(holders[0], "sync_every", 1)
        edges = np.cumsum([0] + [algo.worker.down_size(params, K, b - a, d) for a, b in blocks])
    else:
        holders = [algo.node(params, K, d, a, b) for a, b in blocks]
    for t in range(T):
        sent = []
        for holder, batch in zip(holders, batches):
            X, y, inv_count, active = batch[t]
            decided = holder.decide(X, active) >= 0.0
            if algo.pattern == "server":
                positive, message = holder.up(X, y, inv_count, active)
                sent.append(message.copy())         # a buffer the next round overwrites
            else:
                positive = holder.local_step(X, y, inv_count, active)
                holder.merge(np.empty((0,) + holder.message.shape))
                holder.finish_round()
            np.testing.assert_array_equal(decided, positive)
        if algo.pattern == "server" and (every == 1 or (t + 1) % every == 0):
            replies = server.step(np.concatenate(sent))
            server.after_reply()
            for i, holder in enumerate(holders):
                # each worker its own buffer, as under MPI
                holder.down(replies[edges[i]: edges[i + 1]].copy())
    return holders


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("name", SPLIT)
def test_merged_block_states_are_the_one_block_state(name, batch, unequal_streams):
    """The same rounds with all K tasks in one block and split into 2 and 3 blocks: the
    blocks' states merged by TASK_AXIS are the one block's (shared keys equal in every
    block), and a holder of every task loads the merged state."""
    algo, params, K, d, T, one, _, batches = _setup(name, unequal_streams, batch)
    (whole,) = _drive(algo, params, K, d, one, batches, T)
    cls = algo.worker or algo.node
    expected = whole.state()
    for n in (2, 3):
        _, _, _, _, _, blocks, _, split = _setup(name, unequal_streams, batch, holders=n)
        merged = merge_states(cls, [h.state() for h in _drive(algo, params, K, d, blocks, split, T)])
        assert merged.keys() == expected.keys()
        for key in expected:
            np.testing.assert_allclose(merged[key], expected[key], rtol=1e-12, atol=1e-12,
                                       err_msg=f"{name}: {key} with {n} blocks")
        fresh = (algo.worker(params, K, d, 0, K) if algo.pattern == "server"
                 else algo.node(params, K, d, 0, K))
        fresh.load_state(merged)
        assert _same_state(fresh.state(), merged), f"{name}: the merged state does not load"


def test_node_states_do_not_merge():
    for name in ("d-admm", "d-psgd"):
        with pytest.raises(TypeError, match="does not merge"):
            merge_states(REGISTRY[name].node, [{}, {}])


def test_shared_state_that_differs_is_refused():
    a = {"W": np.zeros((2, 3)), "u": np.zeros(3)}
    b = {"W": np.ones((1, 3)), "u": np.ones(3)}
    from omtl_mpi.algorithms.cadmm import CAdmmWorker
    with pytest.raises(ValueError, match="'u' differs between block 0 and block 1"):
        merge_states(CAdmmWorker, [a, b])
    with pytest.raises(ValueError, match="keys"):
        merge_states(CAdmmWorker, [a, {"W": b["W"]}])
    merged = merge_states(CAdmmWorker, [a, {**b, "u": a["u"]}])
    np.testing.assert_array_equal(merged["W"], np.vstack([a["W"], b["W"]]))


# ------------------------------------------------------------------ register() checks the roles
class _NoDecide:
    """A node with every member of the contract but decide."""

    TASK_AXIS = {"W": 0}
    message = np.zeros(0)

    def __init__(self, params, n_tasks, dim, start, stop, topology=None, node=0):
        self.W = np.zeros((stop - start, dim))

    def local_step(self, X, y, inv_count):
        return np.einsum("kd,bkd->bk", self.W, X) >= 0.0

    def merge(self, received):
        return 0.0

    def finish_round(self):
        pass

    def node_arrays(self):
        return {}

    def state(self):
        return {"W": self.W.copy()}

    def load_state(self, state):
        self.W = np.array(state["W"])

    def task_rows(self):
        return {"W": self.W}


class _OldNode(PaNode):
    """PaNode with the old constructor (params, n_tasks = the block's tasks, dim)."""

    def __init__(self, params, n_tasks, dim):
        super().__init__(params, n_tasks, dim, 0, n_tasks)


class _OldWorker(MtPerceptronWorker):
    """The old worker order (params, start, stop, dim, n_tasks)."""

    def __init__(self, params, start, stop, dim, n_tasks):
        super().__init__(params, n_tasks, dim, start, stop)


def _register(**roles):
    name = "contract-test-toy"
    pattern = "server" if "worker" in roles else "none"
    params = REGISTRY["mt-perceptron" if pattern == "server" else "pa"].params
    try:
        return register(Algorithm(name=name, summary="s", citation="c", pattern=pattern,
                                  reconstruction=False, params=params, **roles))
    finally:
        REGISTRY.pop(name, None)


@pytest.mark.parametrize("roles, expected", [
    ({"node": _NoDecide}, r"node class _NoDecide has no method decide\(\)"),
    ({"node": _OldNode}, r"node class _OldNode takes \(params, n_tasks, dim\); every node class "
                         r"takes \(params, n_tasks, dim, start, stop, topology=None, node=0\)"),
    ({"worker": _OldWorker, "server": REGISTRY["mt-perceptron"].server},
     r"worker class _OldWorker takes \(params, start, stop, dim, n_tasks\); every worker class "
     r"takes \(params, n_tasks, dim, start, stop\)"),
    ({"node": None}, r"'none' pattern needs a node class"),
])
def test_register_refuses_roles_that_break_the_contract(roles, expected):
    with pytest.raises(TypeError, match=expected) as caught:
        _register(**roles)
    assert "\n" not in str(caught.value)
    assert "contract-test-toy" not in REGISTRY


def test_register_takes_roles_that_keep_it():
    class Kept(_NoDecide):
        def decide(self, X):
            return np.einsum("kd,bkd->bk", self.W, X)
    assert _register(node=Kept).node is Kept
    assert "contract-test-toy" not in REGISTRY
