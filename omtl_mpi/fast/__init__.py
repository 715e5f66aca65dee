"""The speed plug-in: what makes rounds faster with more ranks than cores, without changing what
they compute.

One mechanism, an execution option of ``omtl-mpi run`` that the runtime applies and records in
the results; the algorithms and the transports (:mod:`omtl_mpi.comm`) know nothing of it, and
only :mod:`omtl_mpi.runtime` imports this package:

* ``--aslr off`` (:mod:`.addresses`, opt-in): ranks that share cores re-started without address-space
  layout randomisation, so that they share the core's branch predictors (docs/PERFORMANCE.md).

Nothing is imported here at module level: ranks re-execute themselves without address
randomisation (:mod:`.addresses`) before they import numpy or the learners.
"""
