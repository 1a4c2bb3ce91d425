"""`core/textvec.py`: the model-free text representation the kNN router (and the trained router's fast
path) reads questions with: hashed TF-IDF of words and character n-grams, L2-normalised, with cosine top-k."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from stiva_tui.core.textvec import CosineIndex, TextVectorError, TextVectorizer, cosine_top_k

TEXTS = [
    "What is 17 + 25? Give the number only.",
    "Compute 12 * 4 and state the result.",
    "What is the capital of France?",
    "Which city is the capital of Japan?",
    "def f(x): return x * 2\nassert f(3) == ??",
    "Translate 'good morning' into German.",
]


def test_rows_are_unit_length_and_near_duplicates_are_nearer_than_unrelated_texts():
    vec = TextVectorizer(dim=2**12).fit(TEXTS)
    rows = vec.transform(
        [
            "What is the capital of France?",
            "what is the capital city of France ?",  # a near-duplicate: case, one word, spacing
            "Compute 12 * 4 and state the result.",
            "",
        ]
    )
    assert rows.shape == (4, 2**12) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows[:3], axis=1), 1.0, atol=1e-5)
    assert not rows[3].any()  # an empty text is the zero vector, not NaN
    near = float(rows[0] @ rows[1])
    unrelated = float(rows[0] @ rows[2])
    assert near > 0.6 > unrelated + 0.3
    # top-k: each query's nearest base rows, best first, with their cosines
    base = vec.transform(TEXTS)
    index, sims = cosine_top_k(
        vec.transform(["capital of Japan, which city?", "What is 30 + 12? Give the number."]), base, 2
    )
    assert index.shape == sims.shape == (2, 2)
    assert index[0, 0] == 3 and index[1, 0] == 0
    assert sims[0, 0] >= sims[0, 1] and sims[1, 0] >= sims[1, 1]


def test_sparse_rows_and_top_k_agree_with_the_dense_ones():
    vec = TextVectorizer(dim=2**10).fit(TEXTS)
    dense = vec.transform(TEXTS)
    sparse = vec.transform_sparse(TEXTS)
    assert len(sparse) == len(TEXTS) and sparse.dim == 2**10
    assert np.array_equal(sparse.dense(), dense)
    queries = vec.transform(["capital of Italy", "what is 9 + 9"])
    d_index, d_sims = cosine_top_k(queries, dense, 3)
    s_index, s_sims = cosine_top_k(vec.transform_sparse(["capital of Italy", "what is 9 + 9"]), sparse, 3, budget=2)
    assert np.array_equal(d_index, s_index) and np.allclose(d_sims, s_sims, atol=1e-6)
    # k larger than the base: every row, ranked
    index, _ = cosine_top_k(queries, dense, 50)
    assert index.shape == (2, len(TEXTS))


def test_the_representation_is_deterministic_across_processes_and_saved_as_json(tmp_path):
    """The same texts give the same vectors in another interpreter (a stable hash, never Python's
    salted hash()), and to_dict/from_dict through JSON gives the same vectors again."""
    vec = TextVectorizer(dim=2**11).fit(TEXTS)
    saved = json.dumps(vec.to_dict())
    again = TextVectorizer.from_dict(json.loads(saved))
    assert np.array_equal(again.transform(TEXTS), vec.transform(TEXTS))
    (tmp_path / "vec.json").write_text(saved)
    script = (
        "import json, sys, numpy as np\n"
        "from stiva_tui.core.textvec import TextVectorizer\n"
        f"texts = {TEXTS!r}\n"
        "fresh = TextVectorizer(dim=2**11).fit(texts).transform(texts)\n"
        "loaded = TextVectorizer.from_dict(json.load(open(sys.argv[1]))).transform(texts)\n"
        "np.save(sys.argv[2], np.stack([fresh, loaded]))\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # another salt for str hashes
    subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "vec.json"), str(tmp_path / "out.npy")], check=True, env=env
    )
    fresh, loaded = np.load(tmp_path / "out.npy")
    mine = vec.transform(TEXTS)
    assert np.array_equal(fresh, mine) and np.array_equal(loaded, mine)


def test_bad_settings_and_saved_data_are_one_line_errors():
    with pytest.raises(TextVectorError, match="dim"):
        TextVectorizer(dim=0)
    with pytest.raises(TextVectorError, match="before fit"):
        TextVectorizer().transform(["x"])
    with pytest.raises(TextVectorError, match="not a saved text representation"):
        TextVectorizer.from_dict({"format": "something else"})
    data = TextVectorizer(dim=64).fit(TEXTS).to_dict()
    data["df"] = [[999, 1]]
    with pytest.raises(TextVectorError, match="bucket"):
        TextVectorizer.from_dict(data)


def test_the_index_scores_shared_and_rare_buckets_exactly_as_the_dense_product():
    """Buckets most rows share (a boilerplate instruction) are scored as a dense block, the rest by
    postings: together, the same cosines as the plain product, and the same neighbours."""
    boiler = "You are given a Python function and an assertion. Complete the assertion with its output. "
    texts = [boiler + f"def f(x): return x * {i} + {i % 7}\nassert f({i}) == ??" for i in range(40)]
    texts += [f"Tom has {i} apples and buys {i + 3} more. How many apples does he have?" for i in range(40)]
    vec = TextVectorizer(dim=2**12)
    base = vec.fit_transform_sparse(texts)
    assert np.array_equal(base.dense(), vec.transform(texts))  # one pass or two, the same rows
    index = CosineIndex(base)
    assert index._dense.shape[0] > 0  # the shared buckets took the dense path
    queries = vec.transform([boiler + "def f(y): return y - 2\nassert f(5) == ??", "Ann has 4 pears. How many?", ""])
    assert np.allclose(index.scores(queries), queries @ base.dense().T, atol=1e-6)
    nearest, _ = index.top_k(queries, 5)
    assert all(i < 40 for i in nearest[0]) and all(i >= 40 for i in nearest[1])
    assert nearest[2].tolist() == [0, 1, 2, 3, 4]  # the zero vector ties everywhere: lowest rows first
