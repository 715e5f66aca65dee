"""The paper's synthetic multi-task family (Li et al. 2025, section 5.1), seeded and reproducible.

Each instance is a point p uniform in [-3, 3]^2 with the 9 monomial features
(p1, p2, p1 p2, p1^2, p2^2, p1^3, p2^3, p1 p2^2, p1^2 p2); its label is
sign(q2 - h(q1 - a0)) with q = R(theta) p and h(s) = a1 sin s + a2 sin 2s + a3 cos s + a4 cos 2s.
Task parameters follow a random walk (``default_rng(seed)``), so neighbouring tasks are related.
Task k's points come from ``default_rng([seed, k])``, so any subset of the tasks is generated
alone with the same values; blocks of tasks are generated vectorised, bit for bit the same."""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .taskfile import block_spans

# instances generated at once, then written: what bounds the memory of 'omtl-mpi data synth'
BLOCK_ROWS = 2 ** 19

# numpy's SeedSequence (numpy/random/bit_generator.pyx), whose hashing task_rngs vectorises
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R, _M32 = 0xCA01F9DD, 0x4973F715, 0xFFFFFFFF
# PCG64's 128-bit LCG multiplier (numpy/random/src/pcg64)
_PCG_MULT, _M128 = 0x2360ED051FC65DA44385DF649FCCF645, 2 ** 128 - 1


def _pcg64_states(seed: int, ks: list) -> list:
    """(state, increment) of ``np.random.default_rng([seed, k]).bit_generator`` for every k (all
    below 2**32), SeedSequence's hashing computed for all k at once."""
    n, words, rest = len(ks), [] if seed else [0], seed
    while rest:                             # the seed as SeedSequence splits it: 32-bit words
        words.append(rest & _M32)
        rest >>= 32
    words = [np.full(n, w, dtype=np.uint32) for w in words]
    words.append(np.asarray(ks, dtype=np.uint32))
    const = _INIT_A

    def hashmix(value):
        nonlocal const
        value = value ^ np.uint32(const)
        const = (const * _MULT_A) & _M32
        value = value * np.uint32(const)
        return value ^ (value >> np.uint32(16))

    def mix(x, y):
        out = np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y
        return out ^ (out >> np.uint32(16))

    zero = np.zeros(n, dtype=np.uint32)
    pool = [hashmix(words[i] if i < len(words) else zero) for i in range(4)]
    for src in range(4):
        for dst in range(4):
            if src != dst:
                pool[dst] = mix(pool[dst], hashmix(pool[src]))
    const, state = _INIT_B, []
    for i in range(8):                      # generate_state(4, np.uint64): 8 words of 32 bits
        value = pool[i % 4] ^ np.uint32(const)
        const = (const * _MULT_B) & _M32
        value = value * np.uint32(const)
        state.append(value ^ (value >> np.uint32(16)))
    w = [(state[2 * j].astype(np.uint64) | (state[2 * j + 1].astype(np.uint64) << np.uint64(32))).tolist()
         for j in range(4)]
    out = []
    for v0, v1, v2, v3 in zip(*w):          # PCG64's seeding: two LCG steps around the seed
        inc = ((((v2 << 64) | v3) << 1) | 1) & _M128
        out.append(((((inc + ((v0 << 64) | v1)) * _PCG_MULT) + inc) & _M128, inc))
    return out


def task_rngs(seed: int, ks):
    """For each k of ``ks``, a numpy Generator in the state of ``np.random.default_rng([seed, k])``
    (one re-seeded: use it before the next), five times faster; numpy's own where they differ."""
    ks = [int(k) for k in ks]
    states = None
    if ks and all(0 <= k < 2 ** 32 for k in ks):
        states = _pcg64_states(int(seed), ks)
        ref = np.random.default_rng([seed, ks[0]]).bit_generator.state
        if ref.get("bit_generator") != "PCG64" or (ref["state"]["state"], ref["state"]["inc"]) != states[0]:
            states = None
    if states is None:
        for k in ks:
            yield np.random.default_rng([seed, k])
        return
    bits = np.random.PCG64(0)
    gen = np.random.Generator(bits)
    for state, inc in states:
        bits.state = {"bit_generator": "PCG64", "state": {"state": state, "inc": inc},
                      "has_uint32": 0, "uinteger": 0}
        yield gen


def task_parameters(tasks: int, seed: int):
    """The random walk of ``a`` (K, 5) and ``theta`` (K,) from ``default_rng(seed)``: task 0's
    (0, 1, 1, 1, 1) and 0; each next adds N(0, 0.1^2) to every a_i, then N(0, (0.1 pi / 4)^2)."""
    rng = np.random.default_rng(seed)
    draws = rng.standard_normal(6 * (tasks - 1)).reshape(tasks - 1, 6)
    a, theta = np.empty((tasks, 5)), np.empty(tasks)
    a[0], theta[0] = (0.0, 1.0, 1.0, 1.0, 1.0), 0.0
    # as Generator.normal(loc, scale) draws them: loc + scale * z; then the walk, task by task
    a[1:] = 0.0 + 0.1 * draws[:, :5]
    theta[1:] = 0.0 + (0.1 * np.pi / 4) * draws[:, 5]
    np.cumsum(a, axis=0, out=a)
    np.cumsum(theta, out=theta)
    return a, theta


def block_rows(lengths, most: int = BLOCK_ROWS) -> int:
    """Instances in the largest block of whole tasks that streams of ``lengths`` are drawn in."""
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    return max((int(offsets[b] - offsets[a]) for a, b in block_spans(lengths, most)), default=0)


def features(p: np.ndarray) -> np.ndarray:
    """The 9 monomials of points p (n, 2), in the paper's order."""
    p1, p2 = np.ascontiguousarray(p[:, 0]), np.ascontiguousarray(p[:, 1])
    X = np.empty((len(p), 9))
    X[:, 0], X[:, 1] = p1, p2
    np.multiply(p1, p2, out=X[:, 2])
    sq1, sq2 = np.square(p1, out=X[:, 3]), np.square(p2, out=X[:, 4])     # p ** 2
    np.power(p1, 3, out=X[:, 5])                                          # p ** 3
    np.power(p2, 3, out=X[:, 6])
    np.multiply(p1, sq2, out=X[:, 7])
    np.multiply(sq1, p2, out=X[:, 8])
    return X


def _check(tasks, samples, seed) -> None:
    if int(tasks) < 1 or int(samples) < 1:
        raise ConfigError(f"synthetic data needs tasks >= 1 and samples >= 1, got {tasks} and {samples}")
    if int(seed) < 0:
        raise ConfigError(f"--seed must be >= 0, got {seed}")


def generate_tasks(a, theta, seed: int, ks, samples: int, normalize: bool):
    """Features (len(ks) * samples, 9) and labels of tasks ``ks``, each as for the task alone."""
    ks = np.asarray(ks, dtype=np.int64)
    p = np.empty((len(ks), samples, 2))
    for i, gen in enumerate(task_rngs(seed, ks)):
        p[i] = gen.uniform(-3.0, 3.0, size=(samples, 2))
    p = p.reshape(-1, 2)
    c, s = np.repeat(np.cos(theta[ks]), samples), np.repeat(np.sin(theta[ks]), samples)
    q1 = c * p[:, 0] - s * p[:, 1]
    q2 = s * p[:, 0] + c * p[:, 1]
    del c, s
    a0, a1, a2, a3, a4 = (np.repeat(a[ks, i], samples) for i in range(5))
    z = q1 - a0
    h = a1 * np.sin(z) + a2 * np.sin(2 * z) + a3 * np.cos(z) + a4 * np.cos(2 * z)
    X = features(p)
    if normalize:
        X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, np.where(q2 - h >= 0.0, 1, -1).astype(np.int8)


def blocks(tasks: int = 5, samples: int = 10000, seed: int = 0, normalize: bool = False,
           rows: int = BLOCK_ROWS):
    """The family a block of whole tasks at a time, for a writer: (names, X, y, lengths) of about
    ``rows`` instances each, tasks in order; bad values a ConfigError at once."""
    _check(tasks, samples, seed)
    a, theta = task_parameters(tasks, seed)
    return named_blocks(lambda ks: generate_tasks(a, theta, seed, ks, samples, normalize),
                        np.full(tasks, samples, dtype=np.int64), rows)


def named_blocks(draw, lengths, rows: int):
    """(names, X, y, lengths) of whole tasks of stream ``lengths``, about ``rows`` instances at a
    time, X and y of tasks ``ks`` from ``draw(ks)``: what every family's blocks iterate."""
    for lo, hi in block_spans(lengths, rows):
        X, y = draw(range(lo, hi))
        yield [f"task{k}" for k in range(lo, hi)], X, y, lengths[lo:hi]


def task_indices(only, tasks: int, family: str) -> list:
    """The task indices ``only`` (None: every task), one outside 0..tasks-1 refused."""
    wanted = list(range(tasks)) if only is None else [int(k) for k in only]
    for k in wanted:
        if not 0 <= k < tasks:
            raise ConfigError(f"{family} task index {k} out of range 0..{tasks - 1}")
    return wanted


def generate(tasks: int = 5, samples: int = 10000, seed: int = 0, normalize: bool = False,
             only=None):
    """Generate the family; ``only`` restricts it to some task indices (bit-identical slice).

    Returns
    -------
    names : list of str
    X_list : list of ndarray (samples, 9) float64
    y_list : list of ndarray (samples,) int8 in {-1, +1}
    """
    _check(tasks, samples, seed)
    a, theta = task_parameters(tasks, seed)
    wanted = task_indices(only, tasks, "synthetic")
    X_list, y_list = [], []
    for lo, hi in block_spans(np.full(len(wanted), samples, dtype=np.int64), BLOCK_ROWS):
        X, y = generate_tasks(a, theta, seed, wanted[lo:hi], samples, normalize)
        X_list += list(X.reshape(hi - lo, samples, 9))
        y_list += list(y.reshape(hi - lo, samples))
    return [f"task{k}" for k in wanted], X_list, y_list
