"""The speed plug-in: faster rounds with more ranks than cores, the same numbers: ``--aslr off``
(:mod:`.addresses`; docs/DESIGN.md, *The speed plug-in*). Only :mod:`omtl_mpi.runtime` imports
it, and nothing is imported here: ranks re-execute themselves before they import numpy.
"""
