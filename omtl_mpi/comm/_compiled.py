"""The doorbells of :mod:`.doorbell` and a clock, for compiled round loops (runtime/_fused.py).

Imported only by :func:`omtl_mpi.runtime.fused.load`. The C library's ``read``, ``write``,
``clock_gettime`` and ``errno`` are reached through numba intrinsics that name the C symbols,
so the compiled code is cached on disk and linked to this process's C library when it is
loaded (ctypes function pointers are addresses of one process, which numba refuses to cache).

The bells are :class:`~.doorbell.Doorbells`'s FIFOs: ringing writes this rank's 4-byte token
into a peer's FIFO; :func:`wait` reads tokens, counted per sender in ``count`` (which persists
between calls, so a peer a round ahead is credited to the next round), until every sender it
listens to has rung once more.  The fused loops ring with :func:`arrive`, which rings only for
a round's last message, and wait for one token from any sender (all senders share one count).
The watchdog thread of the Python object keeps working: its poison token ends a wait with
:data:`PEER_LOST`.

Every function returns a status instead of raising, because the caller is a compiled loop
that must hand the reason back to Python (runtime/fused.py turns it into the exception).
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..algorithms.kernels import compiled as _compile, sources_digest

# statuses (also the round loops'): OK, and why a wait or a ring stopped
OK = 0
INTERRUPTED = 1     # a signal arrived during a wait (EINTR): Python runs its handler, then resumes
PEER_LOST = 2       # the watchdog's poison token: a rank of the node has exited
UNEXPECTED = 3      # a token from a rank this one does not listen to (``info`` holds the sender)
IO_ERROR = 4        # read or write failed (``info`` holds errno)

POISON = 0xFFFFFFFF
_EINTR = 4
_I32, _I64 = ir.IntType(32), ir.IntType(64)
_BYTES = ir.IntType(8).as_pointer()


def _c_function(builder, name, ret, args):
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, args), name)


def _io(name):
    """An intrinsic calling the C library's ``name(fd, address, nbytes)`` (read or write)."""
    @intrinsic
    def call(typingctx, fd, address, nbytes):
        def codegen(context, builder, signature, args):
            fn = _c_function(builder, name, _I64, [_I32, _BYTES, _I64])
            return builder.call(fn, [builder.trunc(args[0], _I32),
                                     builder.inttoptr(args[1], _BYTES), args[2]])
        return types.int64(types.int64, types.uintp, types.int64), codegen
    return call


_read, _write = _io("read"), _io("write")


@intrinsic
def _errno(typingctx):
    """This thread's ``errno`` (glibc's and musl's ``__errno_location``)."""
    def codegen(context, builder, signature, args):
        fn = _c_function(builder, "__errno_location", _I32.as_pointer(), [])
        return builder.sext(builder.load(builder.call(fn, [])), _I64)
    return types.int64(), codegen


@intrinsic
def _fetch_add(typingctx, address, value):
    """Atomically add ``value`` to the int64 at ``address``; the value before (sequentially
    consistent: what this thread wrote before is visible to whoever sees the sum)."""
    def codegen(context, builder, signature, args):
        return builder.atomic_rmw("add", builder.inttoptr(args[0], _I64.as_pointer()), args[1],
                                  "seq_cst")
    return types.int64(types.uintp, types.int64), codegen


@intrinsic
def _clock_ns(typingctx, clock_id):
    """``clock_gettime(clock_id)`` in nanoseconds (``tv_sec * 10^9 + tv_nsec``)."""
    def codegen(context, builder, signature, args):
        spec = cgutils.alloca_once(builder, ir.ArrayType(_I64, 2))
        fn = _c_function(builder, "clock_gettime", _I32, [_I32, _BYTES])
        builder.call(fn, [builder.trunc(args[0], _I32), builder.bitcast(spec, _BYTES)])
        zero, one = ir.Constant(_I32, 0), ir.Constant(_I32, 1)
        sec = builder.load(builder.gep(spec, [zero, zero]))
        nsec = builder.load(builder.gep(spec, [zero, one]))
        return builder.add(builder.mul(sec, ir.Constant(_I64, 1_000_000_000)), nsec)
    return types.int64(types.int64), codegen


# this module takes code from no other file of the package (kernels.refresh)
BUILT_FROM = sources_digest()


@_compile(types.int64())
def built_from():
    """:data:`BUILT_FROM` as it was when this module was compiled."""
    return BUILT_FROM


@_compile(types.float64(types.int64))
def now(clock_id):
    """Seconds on ``clock_id``: with CLOCK_MONOTONIC, the value ``time.perf_counter()`` gives
    (both are the nanosecond count divided by 1e9), so compiled and Python timings mix."""
    return _clock_ns(clock_id) / 1e9


@_compile(types.int64(types.int64[:], types.uint32[:], types.int64[:]))
def ring(fds, token, info):
    """Write ``token`` (one uint32: this rank) into every FIFO of ``fds``. OK or IO_ERROR."""
    for i in range(fds.shape[0]):
        if _write(fds[i], token.ctypes.data, 4) != 4:
            info[0] = _errno()
            return IO_ERROR
    return OK


@_compile(types.int64(types.int64[:], types.int64, types.int64, types.int64, types.uint32[:],
                      types.int64[:]))
def arrive(counters, index, arrivals, fd, token, info):
    """Count this rank's message to a peer and ring the peer only if the message completes its
    round: the peer sleeps until its last sender has written, and is woken once, not once per
    sender (fused loops only; the Python loops ring every time).

    ``counters[index]`` (in shared memory) counts the messages of the peer's rounds; a round is
    ``arrivals`` messages, and no sender can add to the next round of the same counter before
    the peer has taken this one (it needs the peer's reply or message first), so the message
    that makes the count a multiple of ``arrivals`` is the round's last. OK or IO_ERROR.
    """
    total = _fetch_add(counters.ctypes.data + 8 * index, 1) + 1
    if total % arrivals == 0 and _write(fd, token.ctypes.data, 4) != 4:
        info[0] = _errno()
        return IO_ERROR
    return OK


@_compile(types.int64(types.int64, types.int64[:], types.int64[:], types.uint32[:],
                      types.int64[:]))
def wait(fd, where, count, buf, info):
    """Block until every listened-to sender has rung once more since the last completed wait.

    Parameters
    ----------
    fd : int
        This rank's FIFO (opened read-write, so a read blocks and never sees end-of-file).
    where : int64 array
        ``where[rank]`` is the rank's index in ``count``, -1 for ranks not listened to.
    count : int64 array
        Tokens received and not yet used, per listened-to sender (kept between calls).
    buf : uint32 array
        Scratch for the tokens of one read (its length bounds the tokens read at once).
    info : int64 array
        ``info[0]`` receives errno or the unexpected sender.

    Returns
    -------
    int
        OK (the tokens used are taken from ``count``), or INTERRUPTED, PEER_LOST, UNEXPECTED,
        IO_ERROR; after INTERRUPTED calling again resumes the same wait.
    """
    n = count.shape[0]
    missing = 0
    for i in range(n):
        if count[i] == 0:
            missing += 1
    # one sender: each of its tokens is one round, so read exactly one (a token of the next
    # round stays in the pipe), as Doorbells.wait_all does
    size = 4 if n == 1 else 4 * buf.shape[0]
    while missing:
        got = _read(fd, buf.ctypes.data, size)
        if got < 0:
            err = _errno()
            if err == _EINTR:
                return INTERRUPTED
            info[0] = err
            return IO_ERROR
        for j in range(got // 4):
            sender = buf[j]
            if sender == POISON:
                return PEER_LOST
            i = where[sender] if sender < where.shape[0] else -1
            if i < 0:
                info[0] = sender
                return UNEXPECTED
            if count[i] == 0:
                missing -= 1
            count[i] += 1
    for i in range(n):
        count[i] -= 1
    return OK
