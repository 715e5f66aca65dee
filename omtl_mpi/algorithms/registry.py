"""The learner registry: one entry per algorithm, the single place the runtime and CLI look.

Adding an algorithm is one module plus one entry here; the generic checks in
``tests/test_algorithm_checks.py`` iterate over this registry, so no algorithm can skip them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import footprint
from .footprint import large_d
from .admm import AdmmParams
from .cadmm import CAdmmServer, CAdmmWorker
from .contract import check_roles
from .dadmm import DAdmmNode
from .dpsgd import DpsgdParams, DPsgdNode
from .hashed import HashedParams, HashedServer, HashedWorker
from .independent import (AdagradNode, AdagradParams, AdmmSingleNode, ArowNode, ArowParams,
                          PaNode, PaParams, SingleParams)
from .server_baselines import (DromParams, DromServer, DromWorker, MtPerceptronWorker,
                               NoParams, PmscLogParams, PooledParams, PooledWorker, SumServer)
from .wsteps import AROW_DIAGONAL_ABOVE

PATTERNS = ("none", "server", "neighbours")


@dataclass(frozen=True)
class Algorithm:
    """What the runtime needs to know about a learner.

    Its role classes keep the contract of :mod:`.contract` (shapes, methods, the one
    constructor convention, ``decide``, ``TASK_AXIS``), which :func:`register` checks.

    Attributes
    ----------
    name : str
        The ``--algo`` value.
    summary, citation : str
        One line each, shown by ``omtl-mpi algos``.
    pattern : {"none", "server", "neighbours"}
        Communication pattern: no communication, star around a server on rank 0, or
        neighbourhood exchange over a topology.
    reconstruction : bool
        True when the original equations are unpublished and the reconstruction in
        docs/ALGORITHMS.md section 5 is used.
    params : type
        Frozen dataclass of hyper-parameters, every field an option of the run
        (:mod:`omtl_mpi.options`), with ``__post_init__``, ``resolved(rounds)`` and optionally
        ``inactive()`` and ``FIXED_FIELDS``/``FIXED_FIELDS_WHY``, as docs/DESIGN.md, *Adding a
        learner*, step 1, says.
    worker, server : type
        Role classes of the ``server`` pattern (:class:`.contract.Worker`,
        :class:`.contract.Server`).
    node : type
        Role class of the ``neighbours`` and ``none`` patterns (:class:`.contract.Node`; the
        ``none`` nodes of the package take their empty hooks from :class:`.contract.QuietNode`).
    one_task_per_node : bool
        The neighbour-pattern learner needs exactly as many nodes as tasks (d-psgd).
    class_name : str
        Its public class in ``omtl_mpi`` (``omtl_mpi.CADMM``); "" for a learner registered
        outside the package, which ``omtl_mpi.learner(name, ...)`` makes.
    footprint : callable
        ``footprint(params, held)``: what the learner keeps on the rank that holds the most, as
        :class:`.footprint.Part` (bytes, what, the fix) for the :class:`.footprint.Held` of a
        run, checked before any array is allocated; default four d-vectors per task.
    notice : callable
        ``notice(params, d)``: the line a run says when the learner chose a form on the user's
        behalf at d weights (None: nothing to say); default :func:`.footprint.large_d`, the
        large-d forms of AROW's covariance and of the ADMM steps' coordinates.
    ablation : {"", "independent", "relationship"}
        Its part in the paper's ablation (``omtl-mpi report``: Table 4, the Omega figures):
        every task alone, or an architecture learning the task relationship (with and without).
    """

    name: str
    summary: str
    citation: str
    pattern: str
    reconstruction: bool
    params: type
    worker: type | None = None
    server: type | None = None
    node: type | None = None
    one_task_per_node: bool = False
    class_name: str = ""
    footprint: Callable = footprint.per_task(4)
    notice: Callable = large_d
    ablation: str = ""


REGISTRY: dict[str, Algorithm] = {}


def register(algo: Algorithm) -> Algorithm:
    """Add ``algo`` to :data:`REGISTRY` (and return it).

    Raises
    ------
    ValueError
        An unknown communication pattern.
    TypeError
        A role class that does not keep the contract (:func:`.contract.check_roles`).
    """
    if algo.pattern not in PATTERNS:
        raise ValueError(f"unknown communication pattern {algo.pattern!r}")
    check_roles(algo)
    REGISTRY[algo.name] = algo
    return algo


register(Algorithm(
    name="c-admm",
    summary="Centralised online multi-task relationship learning by ADMM (server + task workers).",
    citation="Li et al., Online Parallel Multi-Task Relationship Learning via ADMM, "
             "Neurocomputing 611 (2025), Algorithm 1",
    pattern="server", reconstruction=False, params=AdmmParams, worker=CAdmmWorker,
    server=CAdmmServer, class_name="CADMM", footprint=footprint.admm, ablation="relationship",
))

register(Algorithm(
    name="d-admm",
    summary="Decentralised ADMM: nodes gossip (c, v, stamp) tables with their neighbours, no server.",
    citation="Li et al., Online Parallel Multi-Task Relationship Learning via ADMM, "
             "Neurocomputing 611 (2025), Algorithm 2",
    pattern="neighbours", reconstruction=False, params=AdmmParams, node=DAdmmNode,
    class_name="DADMM", footprint=footprint.admm, ablation="relationship",
))

register(Algorithm(
    name="d-psgd",
    summary="Decentralised parallel SGD, one model per task, Metropolis-Hastings mixing (baseline).",
    citation="Lian et al., Can Decentralized Algorithms Outperform Centralized Algorithms?, "
             "NeurIPS 2017",
    pattern="neighbours", reconstruction=False, params=DpsgdParams, node=DPsgdNode,
    one_task_per_node=True, class_name="DPSGD",
))

register(Algorithm(
    name="admm-single",
    summary="Every task alone: the C-ADMM math with K = 1, no Omega (the ablation's 'Indpt').",
    citation="Li et al. 2025, baseline ADMM-Single (docs/ALGORITHMS.md section 5)", pattern="none",
    reconstruction=False, params=SingleParams, node=AdmmSingleNode, class_name="ADMMSingle",
    footprint=footprint.admm, ablation="independent",
))

register(Algorithm(
    name="pmsc-log",
    summary="PMSC-Log: C-ADMM with logistic loss, shared + task-specific model, no relationship "
            "learning (reconstruction: the original equations are unpublished).",
    citation="Wu & Huang 2016, as reconstructed in docs/ALGORITHMS.md section 5", pattern="server",
    reconstruction=True, params=PmscLogParams, worker=CAdmmWorker, server=CAdmmServer,
    class_name="PMSCLog", footprint=footprint.admm,
))

register(Algorithm(
    name="drom",
    summary="DROM: capped hinge, Frank-Wolfe task-relatedness step from the leading eigenvector, "
            "parameter server synchronised every tau rounds (reconstruction).",
    citation="Yang & Li, Distributed Primal-Dual Optimization for Online Multi-Task Learning, "
             "AAAI 2020, as reconstructed in docs/ALGORITHMS.md section 5",
    pattern="server", reconstruction=True, params=DromParams, worker=DromWorker, server=DromServer,
    class_name="DROM", footprint=footprint.drom,
))

register(Algorithm(
    name="pa", summary="Independent Passive-Aggressive PA-I per task, no communication.",
    citation="Crammer et al., Online Passive-Aggressive Algorithms, JMLR 2006", pattern="none",
    reconstruction=False, params=PaParams, node=PaNode, class_name="PA",
))

register(Algorithm(
    name="adagrad",
    summary="Independent diagonal AdaGrad on the hinge loss per task, no communication.",
    citation="Duchi, Hazan & Singer, Adaptive Subgradient Methods for Online Learning and "
             "Stochastic Optimization, JMLR 2011",
    pattern="none", reconstruction=False, params=AdagradParams, node=AdagradNode,
    class_name="AdaGrad",
))

register(Algorithm(
    name="arow",
    summary=f"Independent AROW per task (full covariance, diagonal above d = {AROW_DIAGONAL_ABOVE}), "
            "no communication.",
    citation="Crammer, Kulesza & Dredze, Adaptive Regularization of Weight Vectors, NIPS 2009",
    pattern="none", reconstruction=False, params=ArowParams, node=ArowNode, class_name="AROW",
    footprint=footprint.arow,
))

register(Algorithm(
    name="mt-perceptron",
    summary="Multitask perceptron, fully connected interaction: every mistake updates all tasks.",
    citation="Cavallanti, Cesa-Bianchi & Gentile, Linear Algorithms for Online Multitask "
             "Classification, JMLR 2010",
    pattern="server", reconstruction=False, params=NoParams, worker=MtPerceptronWorker,
    server=SumServer, class_name="MTPerceptron",
))

register(Algorithm(
    name="pooled",
    summary="One model for all tasks (hinge OGD, step gamma0/sqrt(t)): no task-specific part.",
    citation="the usual single-model baseline", pattern="server", reconstruction=False,
    params=PooledParams, worker=PooledWorker, server=SumServer, class_name="Pooled",
))

register(Algorithm(
    name="hashed",
    summary="Hashed personalisation: one model on the features and their copies per task, "
            "hashed into 2^b weights (AdaGrad or diagonal AROW per weight).",
    citation="Weinberger et al., Feature Hashing for Large Scale Multitask Learning, ICML 2009; "
             "Daume, Frustratingly Easy Domain Adaptation, ACL 2007",
    pattern="server", reconstruction=False, params=HashedParams, worker=HashedWorker,
    server=HashedServer, class_name="Hashed", footprint=footprint.hashed,
))


def get(name: str) -> Algorithm:
    from ..errors import ConfigError
    try:
        return REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown algorithm {name!r}; choose one of {', '.join(sorted(REGISTRY))} "
                          "(see 'omtl-mpi algos')") from None
