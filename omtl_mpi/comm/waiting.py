"""Waiting for MPI requests without burning a core (docs/DESIGN.md, *Waiting and failure*).

A blocked MPI wait spins at 100% CPU, and with more ranks than cores that takes the core from
the rank everyone waits for. So a waiting rank tests and yields the CPU (``sched_yield``: a
reply within the round is seen within microseconds), and once the wait lasts longer than a
round normally does, sleeps with a growing delay (sleeping from the first test would cost
every round the kernel's smallest sleep, longer than a short round).
"""
from __future__ import annotations

import os
import time
from functools import partial
from time import perf_counter
from types import SimpleNamespace

from mpi4py.MPI import Request

# Tunables, overridable from the environment for benchmarking.
SPIN_SECONDS = float(os.environ.get("OMTL_MPI_WAIT_SPIN", "0.05"))
FIRST_SLEEP = float(os.environ.get("OMTL_MPI_WAIT_FIRST_SLEEP", "1e-4"))
MAX_SLEEP = float(os.environ.get("OMTL_MPI_WAIT_MAX_SLEEP", "5e-3"))
# how a rank waits for a request: "polite" (test and yield the core, then sleep, as the module
# docstring says) or "busy" (MPI's own Wait, which spins)
WAIT_MODE = os.environ.get("OMTL_MPI_WAIT", "polite")
# A wait within the rounds that lasts this long means a peer that will not send: its host or
# the link to it is down (TCP does not say so for minutes), or it is stuck. The rank then ends
# the job with one line. Set-up and tear-down waits (arrive), which wait for data to load or
# results to be written, have no limit.
PEER_TIMEOUT = float(os.environ.get("OMTL_MPI_PEER_TIMEOUT", "60"))


class PeerTimeout(RuntimeError):
    """No message from a peer within :data:`PEER_TIMEOUT` seconds of a round's wait."""


def wait(request, clock) -> None:
    """Complete ``request`` (an mpi4py Request), adding the time spent to ``clock.wait``."""
    _wait(Request.Test, Request.Wait, request, clock)


def wait_all(requests: list, clock) -> None:
    """Complete every request of ``requests``, adding the time spent to ``clock.wait``."""
    _wait(Request.Testall, Request.Waitall, requests, clock)


def wait_some(requests: list, clock, since: float | None = None) -> list:
    """Complete at least one of ``requests`` (not all null) and return the indices of those
    that completed, adding the time spent to ``clock.wait``. ``since``: the perf_counter time
    at which a longer wait made of several of these calls began, from which the yielding
    phase counts (a caller that takes messages one by one while it waits for another would
    otherwise yield the CPU without end, restarting the phase each time); the peer timeout
    still counts from this call, since a message that came shows the peers alive."""
    done = []

    def test(reqs):
        done.extend(Request.Testsome(reqs) or ())
        return bool(done)
    _wait(test, lambda reqs: done.extend(Request.Waitsome(reqs) or ()), requests, clock, since)
    return done


def _wait(test_of, block, what, clock, since: float | None = None) -> None:
    if test_of(what):
        return
    t0 = perf_counter()
    start = t0 if since is None else since
    if WAIT_MODE == "busy":
        block(what)
    else:
        test = partial(test_of, what)
        yield_cpu = os.sched_yield
        deadline = start + SPIN_SECONDS
        while True:
            yield_cpu()
            if test():
                break
            if perf_counter() > deadline:
                delay = FIRST_SLEEP
                # only a round's waits have a limit (their clock keeps rows of rounds)
                give_up = t0 + PEER_TIMEOUT if hasattr(clock, "rows") else float("inf")
                while not test():
                    time.sleep(delay)
                    delay = min(delay * 2.0, MAX_SLEEP)
                    if perf_counter() > give_up:
                        raise PeerTimeout(
                            f"no message from the ranks this one waits for in {PEER_TIMEOUT:g} s "
                            "(OMTL_MPI_PEER_TIMEOUT): a host or the link to it is down, or a "
                            "rank is stuck")
                break
    clock.wait += perf_counter() - t0


def arrive(comm) -> None:
    """Return once every rank of ``comm`` has called this, waiting as :func:`wait` does: MPI's
    collectives spin while they wait, so the rare set-up collectives call this first (C-ADMM's
    server would take a core from the workers still loading their tasks)."""
    wait(comm.Ibarrier(), SimpleNamespace(wait=0.0))     # no round's clock counts it
