"""Graphs for the decentralised learners: the Topology type, generators, validation, mixing.

Pure data (numpy, and scipy's sparse graph routines): the MPI side builds one distributed-graph
communicator from a Topology.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError


@dataclass(frozen=True)
class Topology:
    """An undirected graph on nodes 0..n-1; every edge stored once as (i, j) with i < j, sorted."""

    name: str
    n_nodes: int
    edges: tuple

    @classmethod
    def from_edges(cls, name: str, n_nodes: int, edges) -> "Topology":
        """Build and validate: no self loops, nodes in range, connected; duplicates merged."""
        check_size(n_nodes)
        clean = set()
        for e in edges:
            i, j = int(e[0]), int(e[1])
            if i == j:
                raise ConfigError(f"topology {name!r}: self loop on node {i}; remove edge [{i}, {j}]")
            for v in (i, j):
                if not 0 <= v < n_nodes:
                    raise ConfigError(f"topology {name!r}: edge [{e[0]}, {e[1]}] names node {v}, but the "
                                      f"nodes are 0..{n_nodes - 1} ({n_nodes} nodes)")
            clean.add((min(i, j), max(i, j)))
        topo = cls(name, int(n_nodes), tuple(sorted(clean)))
        comps = topo.components()
        if len(comps) > 1:
            shown = " and ".join("{" + ",".join(map(str, c)) + "}" for c in comps[:4])
            raise ConfigError(f"topology {name!r} on {n_nodes} nodes is disconnected: components {shown}"
                              f"{' ...' if len(comps) > 4 else ''}; add edges between them")
        return topo

    def neighbours(self, i: int) -> tuple:
        """Neighbours of node i, ascending (the order rows arrive in a neighbourhood exchange)."""
        A = self._sparse()
        return tuple(int(j) for j in A.indices[A.indptr[i]:A.indptr[i + 1]])

    def _sparse(self):
        """The symmetric adjacency as a CSR matrix with sorted indices, built once: every graph
        property below is computed from it by scipy's C code, not by loops over nodes."""
        cached = self.__dict__.get("_csr")
        if cached is None:
            from scipy.sparse import csr_matrix
            e = np.asarray(self.edges, dtype=np.int64).reshape(-1, 2)
            rows = np.concatenate([e[:, 0], e[:, 1]])
            cols = np.concatenate([e[:, 1], e[:, 0]])
            cached = csr_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)),
                                shape=(self.n_nodes, self.n_nodes))
            cached.sort_indices()
            object.__setattr__(self, "_csr", cached)      # frozen: a cache, not a field
        return cached

    @property
    def degrees(self) -> np.ndarray:
        return np.diff(self._sparse().indptr)

    def components(self) -> list:
        from scipy.sparse.csgraph import connected_components
        n, labels = connected_components(self._sparse(), directed=False)
        # in the order of their smallest node, as a breadth-first search from node 0 finds them
        comps = [np.flatnonzero(labels == c).tolist() for c in range(n)]
        return sorted(comps, key=lambda c: c[0])

    @property
    def diameter(self) -> int:
        from scipy.sparse.csgraph import shortest_path
        if self.n_nodes == 1:
            return 0
        return int(shortest_path(self._sparse(), directed=False, unweighted=True).max())

    def hops(self, nodes) -> np.ndarray:
        """The hop counts (len(nodes), n_nodes) from each of ``nodes`` to every node: a
        breadth-first search from each (the graph is connected)."""
        from scipy.sparse.csgraph import shortest_path
        return shortest_path(self._sparse(), directed=False, unweighted=True,
                             indices=list(nodes)).astype(np.int64)

    def mixing_matrix(self) -> np.ndarray:
        """Metropolis-Hastings weights: M_kj = 1/(1 + max(deg_k, deg_j)) on edges, M_kk = 1 - rest
        (a dense matrix: refused beyond :data:`MAX_DENSE` nodes)."""
        if self.n_nodes > MAX_DENSE:
            raise ConfigError(f"the mixing matrix of {self.n_nodes} nodes is a dense matrix, more "
                              f"than the {MAX_DENSE} nodes this release holds; use fewer nodes")
        deg = self.degrees
        M = np.zeros((self.n_nodes, self.n_nodes))
        e = np.asarray(self.edges, dtype=np.int64).reshape(-1, 2)
        w = 1.0 / (1.0 + np.maximum(deg[e[:, 0]], deg[e[:, 1]]))
        M[e[:, 0], e[:, 1]] = w
        M[e[:, 1], e[:, 0]] = w
        M[np.diag_indices(self.n_nodes)] = 1.0 - M.sum(axis=1)
        return M

    def slem(self) -> float:
        """Second-largest eigenvalue modulus of the mixing matrix: how slowly gossip mixes."""
        if self.n_nodes == 1:
            return 0.0
        ev = np.sort(np.abs(np.linalg.eigvalsh(self.mixing_matrix())))
        return float(ev[-2])


# ----------------------------------------------------------------------------- generators
def ring(n):
    return [(i, (i + 1) % n) for i in range(n)] if n > 2 else ([(0, 1)] if n == 2 else [])


def full(n):
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def star(n):
    return [(0, i) for i in range(1, n)]


def torus(n, rows=None):
    if rows is None:
        rows = max(r for r in range(1, int(np.sqrt(n)) + 1) if n % r == 0)
    if rows < 1 or n % rows:
        raise ConfigError(f"torus: rows={rows} does not divide the {n} nodes; choose a divisor of {n}")
    cols = n // rows
    edges = []
    for r in range(rows):
        for c in range(cols):
            v = r * cols + c
            edges.append((v, r * cols + (c + 1) % cols))
            edges.append((v, ((r + 1) % rows) * cols + c))
    return [e for e in edges if e[0] != e[1]]


def random_regular(n, degree=3, seed=0, tries=1000):
    if degree >= n or degree < 1 or (n * degree) % 2:
        raise ConfigError(f"random-regular: degree {degree} impossible on {n} nodes "
                          "(need 1 <= degree < nodes and nodes x degree even)")
    rng = np.random.default_rng(seed)
    for _ in range(tries):
        stubs = rng.permutation(np.repeat(np.arange(n), degree)).reshape(-1, 2)
        lo, hi = stubs.min(axis=1), stubs.max(axis=1)
        if (lo != hi).all():                                # no self-loop ...
            keys = np.unique(lo.astype(np.int64) * n + hi)  # ... and no edge twice
            if keys.size == len(stubs):
                edges = list(zip((keys // n).tolist(), (keys % n).tolist()))
                if _connected(n, edges):
                    return edges
    raise ConfigError(f"random-regular: no simple connected {degree}-regular graph on {n} nodes found "
                      f"in {tries} tries with seed {seed}; try another seed or degree")


def erdos_renyi(n, p=0.5, seed=0, retries=100):
    if not 0.0 < p <= 1.0:
        raise ConfigError(f"erdos-renyi: p must be in (0, 1], got {p}")
    for attempt in range(retries):
        rng = np.random.default_rng([seed, attempt])
        edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < p]
        if _connected(n, edges):
            return edges
    raise ConfigError(f"erdos-renyi: no connected graph on {n} nodes with p={p} in {retries} draws; "
                      "raise p")


def watts_strogatz(n, k=2, beta=0.3, seed=0, retries=100):
    if k % 2 or k < 2 or k >= n:
        raise ConfigError(f"watts-strogatz: k must be even with 2 <= k < nodes, got k={k} on {n} nodes")
    for attempt in range(retries):
        rng = np.random.default_rng([seed, attempt])
        edges = {(i, (i + j) % n) for i in range(n) for j in range(1, k // 2 + 1)}
        edges = {(min(a, b), max(a, b)) for a, b in edges}
        near = [set() for _ in range(n)]
        for a, b in edges:
            near[a].add(b)
            near[b].add(a)
        for a, b in sorted(edges):
            if rng.random() < beta:
                # the new end is drawn uniformly among the nodes not yet joined to a (nor a):
                # the c-th of them, found by stepping over the excluded ones in order, which is
                # the node rng.choice would pick from that list, without listing all n nodes
                excluded = sorted(near[a] | {a})
                if n > len(excluded):
                    c = int(rng.integers(0, n - len(excluded)))
                    for e in excluded:
                        if e > c:
                            break
                        c += 1
                    edges.discard((a, b))
                    near[a].discard(b)
                    near[b].discard(a)
                    edges.add((min(a, c), max(a, c)))
                    near[a].add(c)
                    near[c].add(a)
        if _connected(n, edges):
            return sorted(edges)
    raise ConfigError(f"watts-strogatz: no connected graph on {n} nodes in {retries} draws; lower beta")


def _connected(n, edges) -> bool:
    return len(Topology("_", n, tuple(edges)).components()) == 1


GENERATORS = {
    "ring": (ring, {}),
    "full": (full, {}),
    "star": (star, {}),
    "torus": (torus, {"rows": None}),
    "random-regular": (random_regular, {"degree": 3, "seed": 0}),
    "erdos-renyi": (erdos_renyi, {"p": 0.5, "seed": 0}),
    "watts-strogatz": (watts_strogatz, {"k": 2, "beta": 0.3, "seed": 0}),
}
ALIASES = {"fully-connected": "full", "complete": "full"}
# A topology's nodes are the ranks of a job: far more is a mistyped number, refused at once
MAX_NODES = 1 << 16
# Generators that visit every pair of nodes (full, erdos-renyi), and what needs a dense node x
# node matrix (the mixing matrix of d-psgd, and the SLEM and diameter that 'topo show' prints),
# take time and memory in the square of the nodes: refused, or not computed, beyond these
MAX_PAIRS = 2_500_000
MAX_DENSE = 2048
_PAIRWISE = ("full", "erdos-renyi")


def check_size(n_nodes: int, kind: str | None = None) -> None:
    """ConfigError unless ``n_nodes`` nodes of generator ``kind`` can be built here."""
    if n_nodes < 1:
        raise ConfigError(f"a topology needs at least 1 node, got {n_nodes}")
    if n_nodes > MAX_NODES:
        raise ConfigError(f"a topology of {n_nodes} nodes is more than the {MAX_NODES} this "
                          "release handles; use fewer nodes (ranks)")
    if kind in _PAIRWISE and n_nodes * (n_nodes - 1) // 2 > MAX_PAIRS:
        raise ConfigError(f"topology kind {kind!r} visits every pair of its {n_nodes} nodes, more "
                          f"than the {MAX_PAIRS} pairs this release builds; use a sparse kind "
                          "(ring, torus, random-regular, watts-strogatz) or fewer nodes")


def generate(kind: str, n_nodes: int, name: str | None = None, **params) -> Topology:
    """A generated topology sized to ``n_nodes``; unknown kinds and parameters are refused."""
    kind = ALIASES.get(kind, kind)
    if kind not in GENERATORS:
        raise ConfigError(f"unknown topology kind {kind!r}; known kinds: {', '.join(GENERATORS)} "
                          "(or a path to a TOML file)")
    fn, defaults = GENERATORS[kind]
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ConfigError(f"topology kind {kind!r} has no parameter {unknown[0]!r}; "
                          f"its parameters: {', '.join(defaults) or 'none'}")
    check_size(n_nodes, kind)
    for key, value in params.items():
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if key in ("seed", "degree", "k", "rows"):
            ok = ok and isinstance(value, int) and value >= 0
        if not ok:
            raise ConfigError(f"topology kind {kind!r}: parameter {key} = {value!r} must be a "
                              f"{'non-negative integer' if key in ('seed', 'degree', 'k', 'rows') else 'number'}")
    return Topology.from_edges(name or kind, n_nodes, fn(n_nodes, **{**defaults, **params}))
