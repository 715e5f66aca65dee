"""How arrays move between roles: in one process, or over MPI (star or neighbour graph).

The algorithms never import this package; the runtime hands their messages to a ``comm``
object and times the calls (:class:`PhaseClock`).
"""
