"""Topology files (TOML) and the ``--topology NAME|PATH`` resolution. A file names a generator
that sizes itself to the nodes (``kind = "random-regular"``, its parameters beside) or an
explicit 0-based edge list of a fixed node count (``nodes = 5``, ``edges = [[0, 1], ...]``):
topologies/README.md shows both.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

from ..atomic import atomic_path
from ..errors import ConfigError, UserError
from ..paths import regular_file
from .core import ALIASES, GENERATORS, MAX_DENSE, Topology, generate

SHIPPED = Path(__file__).resolve().parents[2] / "topologies"
_META = {"name", "description"}


def shipped_names() -> list:
    return sorted(p.stem for p in SHIPPED.glob("*.toml")) if SHIPPED.is_dir() else []


def topology_file(spec: str) -> Path | None:
    """The file ``--topology spec`` reads (a shipped file's or a path), None for a generator
    kind or a name that is nothing: what a command must not write over."""
    spec = str(spec)
    if spec in GENERATORS or spec in ALIASES:
        return None
    path = Path(spec)
    named = not (path.suffix == ".toml" or os.sep in spec)     # a name rather than a path
    if named and (SHIPPED / f"{spec}.toml").is_file():
        return SHIPPED / f"{spec}.toml"
    # a path where something is (a FIFO, a folder, a dangling link): read_toml says what is
    # wrong with it; a mistyped name that happens to be a folder here is an unknown name
    return None if not os.path.lexists(path) or (named and path.is_dir()) else path


def load_topology(spec: str, n_nodes: int) -> Topology:
    """Resolve ``spec`` (generator kind, shipped file name, or TOML path) for ``n_nodes`` nodes."""
    spec = str(spec)
    if spec in GENERATORS or spec in ALIASES:
        return generate(spec, n_nodes)
    path = topology_file(spec)
    if path is None:
        raise ConfigError(f"unknown topology {spec!r}: not a generator ({', '.join(GENERATORS)}), "
                          f"not a shipped file ({', '.join(shipped_names())}), and no such file")
    return read_toml(path, n_nodes)


def read_toml(path, n_nodes: int) -> Topology:
    """Read one topology file; every problem is a ConfigError naming the file."""
    path = Path(path)
    try:
        # nothing but a regular file is opened: a FIFO would block forever
        regular_file(path, "topology file")
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except UserError as exc:
        raise ConfigError(f"topology file {exc}") from None
    except OSError as exc:
        raise ConfigError(f"topology file {path}: cannot read it ({exc.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"topology file {path}: invalid TOML ({exc})") from None
    name = str(doc.get("name", path.stem))
    has_kind, has_edges = "kind" in doc, "edges" in doc or "nodes" in doc
    if has_kind and has_edges:
        raise ConfigError(f"topology file {path}: give either 'kind' (a generator) or 'nodes' and "
                          "'edges' (an explicit graph), not both")
    if has_kind:
        params = {k: v for k, v in doc.items() if k not in _META | {"kind"}}
        try:
            return generate(str(doc["kind"]), n_nodes, name=name, **params)
        except ConfigError as exc:
            raise ConfigError(f"topology file {path}: {exc}") from None
    if not has_edges:
        raise ConfigError(f"topology file {path}: needs 'kind = \"ring\"' (or another generator) or "
                          "'nodes' and 'edges'")
    nodes, edges = doc.get("nodes"), doc.get("edges")
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        raise ConfigError(f"topology file {path}: 'nodes' must be a positive integer, got {nodes!r}")
    if not isinstance(edges, list) or not all(
            isinstance(e, list) and len(e) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                        for v in e) for e in edges):
        raise ConfigError(f"topology file {path}: 'edges' must be a list of [i, j] pairs of integers")
    if nodes != n_nodes:
        raise ConfigError(f"topology file {path} has {nodes} nodes but the run has {n_nodes} nodes "
                          f"(ranks); start {nodes} ranks or use a generator kind that sizes itself")
    try:
        return Topology.from_edges(name, nodes, edges)
    except ConfigError as exc:
        raise ConfigError(f"topology file {path}: {exc}") from None


def describe(topo: Topology) -> dict:
    """Facts about a topology for ``omtl-mpi topo show`` (JSON-ready)."""
    deg = topo.degrees
    dense = topo.n_nodes <= MAX_DENSE
    return {"name": topo.name, "nodes": topo.n_nodes, "edges": len(topo.edges),
            "edge_list": [list(e) for e in topo.edges], "degrees": deg.tolist(),
            "min_degree": int(deg.min()), "max_degree": int(deg.max()),
            # both take the square of the nodes in time: not computed for larger graphs
            "diameter": topo.diameter if dense else None, "slem": topo.slem() if dense else None,
            "connected": True}


def draw_png(topo: Topology, path) -> None:
    """Nodes on a circle, edges as lines; written atomically."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n = topo.n_nodes
    ang = 2 * np.pi * np.arange(n) / n
    xy = np.stack([np.cos(ang), np.sin(ang)], axis=1)
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    for a, b in topo.edges:
        ax.plot(*xy[[a, b]].T, color="0.6", lw=1, zorder=1)
    ax.scatter(*xy.T, s=300, color="tab:blue", zorder=2)
    for i, (x, y) in enumerate(xy):
        ax.text(x, y, str(i), ha="center", va="center", color="white", fontsize=8, zorder=3)
    slem = f", SLEM {topo.slem():.3f}" if n <= MAX_DENSE else ""
    ax.set_title(f"{topo.name}: {n} nodes, {len(topo.edges)} edges{slem}")
    ax.set_aspect("equal")
    ax.axis("off")
    try:
        # the format named: the temporary name's suffix is not .png
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
    finally:
        plt.close(fig)
