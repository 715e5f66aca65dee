"""Graphs for the decentralised learners (pure data; topologies/ holds ready files)."""
from .core import GENERATORS, Topology, generate
from .files import describe, draw_png, load_topology, topology_file

__all__ = ["Topology", "GENERATORS", "generate", "load_topology", "describe", "draw_png",
           "topology_file"]
