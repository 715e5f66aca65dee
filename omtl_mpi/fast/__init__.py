"""The speed plug-in: what makes rounds faster with more ranks than cores, without changing what
they compute.

Two mechanisms, each an execution option of ``omtl-mpi run`` that the runtime picks and records
in the results; the algorithms and the plain transports (:mod:`omtl_mpi.comm`) know nothing of
them, and only :mod:`omtl_mpi.runtime` imports this package:

* ``--transport shm`` (:mod:`.shm`, :mod:`.doorbell`): one node's messages through MPI shared
  memory, waiting ranks asleep on a FIFO instead of polling, which is what makes more ranks
  than cores cheap on a laptop (docs/PERFORMANCE.md: wall and CPU time per round);
* ``--aslr auto`` (:mod:`.addresses`): ranks that share cores re-started without address-space
  layout randomisation, so that they share the core's branch predictors.

Nothing is imported here at module level: ranks re-execute themselves without address
randomisation (:mod:`.addresses`) before they import numpy or the learners.
"""
