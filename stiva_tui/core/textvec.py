"""A small, model-free text representation: hashed TF-IDF of word n-grams and character n-grams,
L2-normalised, and cosine top-k. What the kNN router (bench/derived.py) reads questions with, and
the fast representation a trained router may use; it imports nothing of Stiva.

    vec = TextVectorizer(dim=2**15).fit(train_questions)
    rows = vec.transform(questions)                  # float32 (n, dim), unit rows (an empty text: zeros)
    index, sims = cosine_top_k(rows, vec.transform(train_questions), k=10)
    json.dumps(vec.to_dict())                        # the fitted weights as JSON-able data
    TextVectorizer.from_dict(data)                   # the same vectors again

- Features: the NFKC-normalised, lower-cased text's word unigrams and bigrams, and its character
  3- to 5-grams (over the first `max_chars` characters, whitespace collapsed); each feature is
  hashed with CRC-32 (stable across processes and machines, unlike Python's salted `hash()`) into
  one of `dim` buckets.
- Weights: sublinear term frequency (1 + ln tf) times the smoothed IDF of the fitted texts,
  ln((1 + n) / (1 + df)) + 1. The word block and the character block are each L2-normalised and
  mixed with `word_weight` of the squared norm going to words, then the row is normalised again.
- `transform` gives dense rows (n x dim x 4 bytes: 128 KiB a row at the default dim);
  `transform_sparse` gives the same rows in compressed sparse form, for many texts. `cosine_top_k`
  and `CosineIndex` (an inverted index of the base rows, kept for later queries) take either.

numpy is imported inside the functions that use it.
"""

from __future__ import annotations

import math
import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["FORMAT", "CosineIndex", "SparseRows", "TextVectorError", "TextVectorizer", "cosine_top_k"]

FORMAT = "stiva-textvec"
VERSION = 1
DEFAULT_DIM = 2**15
_DENSE_CELLS = 2**24  # CosineIndex keeps at most this many dense cells (64 MiB)
_WORD = re.compile(r"\w+")


class TextVectorError(ValueError):
    """A bad setting, a representation used before `fit`, or saved data that is not one."""


@dataclass(frozen=True)
class SparseRows:
    """Rows in compressed sparse row form: row i's buckets are `indices[indptr[i]:indptr[i + 1]]`
    (ascending) and its weights the same slice of `data`."""

    indptr: NDArray[np.int64]
    indices: NDArray[np.int64]
    data: NDArray[np.float32]
    dim: int

    def __len__(self) -> int:
        return int(self.indptr.shape[0]) - 1

    def dense(self, start: int = 0, stop: int | None = None) -> NDArray[np.float32]:
        """Rows start..stop as a dense float32 array."""
        import numpy as np

        stop = len(self) if stop is None else min(stop, len(self))
        out = np.zeros((max(0, stop - start), self.dim), dtype=np.float32)
        lo, hi = int(self.indptr[start]), int(self.indptr[stop])
        counts = np.diff(self.indptr[start : stop + 1])
        rows = np.repeat(np.arange(stop - start), counts)
        out[rows, self.indices[lo:hi]] = self.data[lo:hi]
        return out


class TextVectorizer:
    """Hashed TF-IDF of word and character n-grams; `fit` learns the document frequencies."""

    def __init__(
        self,
        dim: int = DEFAULT_DIM,
        *,
        word_ngrams: tuple[int, int] = (1, 2),
        char_ngrams: tuple[int, int] = (3, 5),
        word_weight: float = 0.5,
        max_chars: int = 4000,
    ) -> None:
        if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 2**24:
            raise TextVectorError(f"textvec dim must be an integer from 1 to {2**24}, not {dim!r}")
        for name, (low, high) in (("word_ngrams", word_ngrams), ("char_ngrams", char_ngrams)):
            if not 1 <= low <= high <= 16:
                raise TextVectorError(f"textvec {name} must be (low, high) with 1 <= low <= high <= 16")
        if not 0.0 <= word_weight <= 1.0:
            raise TextVectorError("textvec word_weight must be from 0 to 1")
        if max_chars < 1:
            raise TextVectorError("textvec max_chars must be at least 1")
        self.dim = dim
        self.word_ngrams = (int(word_ngrams[0]), int(word_ngrams[1]))
        self.char_ngrams = (int(char_ngrams[0]), int(char_ngrams[1]))
        self.word_weight = float(word_weight)
        self.max_chars = int(max_chars)
        self.docs: int | None = None  # texts fitted on; None before fit
        self._df: NDArray[np.int64] | None = None  # bucket -> how many fitted texts have a feature in it
        self._idf: NDArray[np.float64] | None = None

    # --- features ----------------------------------------------------------------------------

    def _grams(self, text: str) -> tuple[list[str], list[str]]:
        text = unicodedata.normalize("NFKC", text).lower()
        words = _WORD.findall(text)
        low, high = self.word_ngrams
        word_feats = ["w" + " ".join(words[i : i + n]) for n in range(low, high + 1) for i in range(len(words) - n + 1)]
        collapsed = " ".join(text[: self.max_chars].split())
        if not collapsed:
            return word_feats, []
        chars = " " + collapsed + " "
        low, high = self.char_ngrams
        char_feats = ["c" + chars[i : i + n] for n in range(low, high + 1) for i in range(len(chars) - n + 1)]
        return word_feats, char_feats

    def _blocks(self, text: str) -> list[tuple[NDArray[np.int64], NDArray[np.float64]]]:
        """The text's (buckets ascending, term counts) of its word block and of its char block."""
        import numpy as np

        blocks = []
        for feats in self._grams(text):
            counter = Counter(feats)
            hashes = np.fromiter((zlib.crc32(f.encode("utf-8")) for f in counter), dtype=np.int64, count=len(counter))
            counts = np.fromiter(counter.values(), dtype=np.float64, count=len(counter))
            buckets, inverse = np.unique(hashes % self.dim, return_inverse=True)
            tf = np.bincount(inverse.reshape(-1), weights=counts, minlength=len(buckets))
            blocks.append((buckets, np.asarray(tf, dtype=np.float64)))
        return blocks

    # --- fitting -----------------------------------------------------------------------------

    def fit(self, texts: Iterable[str]) -> TextVectorizer:
        """Learn the document frequency of each bucket from `texts`; returns self."""
        self._fit_blocks(self._blocks(text) for text in texts)
        return self

    def _fit_blocks(self, each: Iterable[list[tuple[NDArray[np.int64], NDArray[np.float64]]]]) -> None:
        import numpy as np

        df = np.zeros(self.dim, dtype=np.int64)
        docs = 0
        for (words, _), (chars, _) in each:
            docs += 1
            df[np.union1d(words, chars)] += 1
        self._set(docs, df)

    def _set(self, docs: int, df: NDArray[np.int64]) -> None:
        import numpy as np

        self.docs = docs
        self._df = df
        self._idf = np.log((1.0 + docs) / (1.0 + df)) + 1.0

    @property
    def df(self) -> dict[int, int]:
        """Bucket -> how many fitted texts have a feature in it (the buckets none has left out)."""
        import numpy as np

        if self._df is None:
            return {}
        nonzero = np.flatnonzero(self._df)
        return dict(zip(nonzero.tolist(), self._df[nonzero].tolist()))

    def _row(
        self, blocks: list[tuple[NDArray[np.int64], NDArray[np.float64]]]
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        import numpy as np

        assert self._idf is not None
        parts_b, parts_w = [], []
        for (buckets, counts), share in zip(blocks, (self.word_weight, 1.0 - self.word_weight)):
            if not len(buckets) or share == 0.0:
                continue
            weights = (1.0 + np.log(counts)) * self._idf[buckets]
            norm = float(np.sqrt(np.dot(weights, weights)))
            if norm > 0.0:
                parts_b.append(buckets)
                parts_w.append(weights * (math.sqrt(share) / norm))
        if not parts_b:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        buckets, inverse = np.unique(np.concatenate(parts_b), return_inverse=True)
        values = np.bincount(inverse.reshape(-1), weights=np.concatenate(parts_w), minlength=len(buckets))
        return buckets, values / float(np.sqrt(np.dot(values, values)))

    # --- transforming ------------------------------------------------------------------------

    def transform_sparse(self, texts: Iterable[str]) -> SparseRows:
        """The texts' unit rows in compressed sparse form."""

        if self.docs is None:
            raise TextVectorError("textvec: transform before fit (fit it on texts, or load it with from_dict)")
        return self._sparse_rows([self._row(self._blocks(text)) for text in texts])

    def fit_transform_sparse(self, texts: Iterable[str]) -> SparseRows:
        """`fit(texts)` then `transform_sparse(texts)`, reading each text once."""
        blocks = [self._blocks(text) for text in texts]
        self._fit_blocks(blocks)
        return self._sparse_rows([self._row(b) for b in blocks])

    def _sparse_rows(self, rows: list[tuple[NDArray[np.int64], NDArray[np.float64]]]) -> SparseRows:
        import numpy as np

        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(b) for b, _ in rows], out=indptr[1:])
        if not rows:
            return SparseRows(indptr, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), self.dim)
        return SparseRows(
            indptr,
            np.concatenate([b for b, _ in rows]).astype(np.int64),
            np.concatenate([v for _, v in rows]).astype(np.float32),
            self.dim,
        )

    def transform(self, texts: Iterable[str]) -> NDArray[np.float32]:
        """The texts' unit rows, dense: float32 (len(texts), dim); an empty text is all zeros."""
        return self.transform_sparse(texts).dense()

    def fit_transform(self, texts: Iterable[str]) -> NDArray[np.float32]:
        return self.fit_transform_sparse(texts).dense()

    # --- saving ------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The settings and fitted frequencies as JSON-able data (`from_dict` reads it back)."""
        if self.docs is None:
            raise TextVectorError("textvec: nothing to save before fit")
        return {
            "format": FORMAT,
            "version": VERSION,
            "dim": self.dim,
            "word_ngrams": list(self.word_ngrams),
            "char_ngrams": list(self.char_ngrams),
            "word_weight": self.word_weight,
            "max_chars": self.max_chars,
            "docs": self.docs,
            "df": [[bucket, count] for bucket, count in sorted(self.df.items())],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TextVectorizer:
        """A fitted representation from `to_dict`'s data (TextVectorError when it is not one)."""
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise TextVectorError(f'not a saved text representation (no "format": "{FORMAT}")')
        if data.get("version") != VERSION:
            raise TextVectorError(
                f"saved text representation version {data.get('version')!r}: this Stiva reads {VERSION}"
            )
        try:
            vec = cls(
                int(data["dim"]),
                word_ngrams=(int(data["word_ngrams"][0]), int(data["word_ngrams"][1])),
                char_ngrams=(int(data["char_ngrams"][0]), int(data["char_ngrams"][1])),
                word_weight=float(data["word_weight"]),
                max_chars=int(data["max_chars"]),
            )
            docs = int(data["docs"])
            df = {int(bucket): int(count) for bucket, count in data["df"]}
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            if isinstance(exc, TextVectorError):
                raise
            raise TextVectorError(f"saved text representation is damaged: {exc!r}") from None
        bad = [b for b, c in df.items() if not 0 <= b < vec.dim or not 0 < c <= docs]
        if docs < 0 or bad:
            raise TextVectorError(
                f"saved text representation is damaged: bucket {bad[0] if bad else '?'} is outside 0..{vec.dim - 1} "
                f"or counted outside 1..{docs}"
            )
        import numpy as np

        counts = np.zeros(vec.dim, dtype=np.int64)
        counts[list(df)] = list(df.values())
        vec._set(docs, counts)
        return vec


def _sparse(rows: NDArray[np.float32] | SparseRows) -> SparseRows:
    """`rows` in sparse form (dense rows are read for their non-zero entries)."""
    import numpy as np

    if isinstance(rows, SparseRows):
        return rows
    dense = np.asarray(rows, dtype=np.float32)
    if dense.ndim != 2:
        raise TextVectorError(f"textvec: rows must be a 2-d array, not {dense.ndim}-d")
    row_ids, indices = np.nonzero(dense)
    indptr = np.zeros(dense.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_ids, minlength=dense.shape[0]), out=indptr[1:])
    return SparseRows(indptr, indices.astype(np.int64), dense[row_ids, indices], int(dense.shape[1]))


class CosineIndex:
    """Base rows indexed for the cosine top-k of many queries, or of one query in milliseconds. The
    rows are taken to be unit length, as `transform`'s are.

    Buckets that many base rows share (the common character n-grams, a boilerplate instruction) are
    kept as a dense block and scored with one matrix product; the rest are an inverted index whose
    postings are summed per (query, base row)."""

    def __init__(self, base: NDArray[np.float32] | SparseRows) -> None:
        import numpy as np

        rows = _sparse(base)
        self.dim = rows.dim
        self.size = len(rows)
        owner = np.repeat(np.arange(self.size, dtype=np.int64), np.diff(rows.indptr))
        postings = np.bincount(rows.indices, minlength=self.dim)
        # a bucket is dense when scoring it by postings would cost more than a column of the product:
        # with queries like the base, about when it holds over 1/24 of the rows
        common = np.flatnonzero(postings >= max(8, self.size // 24))
        common = common[np.argsort(-postings[common], kind="stable")][: _DENSE_CELLS // max(1, self.size)]
        self._column = np.full(self.dim, -1, dtype=np.int64)
        self._column[np.sort(common)] = np.arange(len(common))
        self._dense = np.zeros((len(common), self.size), dtype=np.float32)
        column = self._column[rows.indices]
        heavy = column >= 0
        self._dense[column[heavy], owner[heavy]] = rows.data[heavy]
        light = ~heavy
        order = np.argsort(rows.indices[light], kind="stable")  # by bucket, then by row
        self._rows = owner[light][order]
        self._values = rows.data[light][order].astype(np.float64)
        self._starts = np.zeros(self.dim + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows.indices[light], minlength=self.dim), out=self._starts[1:])

    def __len__(self) -> int:
        return self.size

    def _work(self, rows: SparseRows) -> NDArray[np.int64]:
        """Each query's postings to sum (its sparse part's cost)."""
        import numpy as np

        postings = self._starts[rows.indices + 1] - self._starts[rows.indices]
        query_of = np.repeat(np.arange(len(rows)), np.diff(rows.indptr))
        return np.bincount(query_of, weights=postings, minlength=len(rows)).astype(np.int64)

    def scores(self, queries: NDArray[np.float32] | SparseRows) -> NDArray[np.float32]:
        """Every query's cosine with every base row: float32 (len(queries), len(base))."""
        import numpy as np

        rows = _sparse(queries)
        if rows.dim != self.dim:
            raise TextVectorError(f"textvec: queries have {rows.dim} buckets, the index {self.dim}")
        n = len(rows)
        query_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(rows.indptr))
        column = self._column[rows.indices]
        heavy = column >= 0
        dense = np.zeros((n, self._dense.shape[0]), dtype=np.float32)
        dense[query_of[heavy], column[heavy]] = rows.data[heavy]
        out = (dense @ self._dense).astype(np.float64)
        light = ~heavy
        buckets, values, owners = rows.indices[light], rows.data[light], query_of[light]
        starts = self._starts[buckets]
        lengths = self._starts[buckets + 1] - starts
        total = int(lengths.sum())
        if total:
            # each (query entry, posting of its bucket): the posting's place, its base row, the product
            offsets = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(total, dtype=np.int64)
            products = np.repeat(values.astype(np.float64), lengths) * self._values[offsets]
            cells = np.repeat(owners, lengths) * self.size + self._rows[offsets]
            out += np.bincount(cells, weights=products, minlength=n * self.size).reshape(n, self.size)
        return out.astype(np.float32)

    def top_k(
        self, queries: NDArray[np.float32] | SparseRows, k: int, *, budget: int = 2**22
    ) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        """(index, sims): each query's `k` nearest base rows by cosine, best first; equal cosines
        (to 6 decimals) rank the lower base row first. Both (len(queries), min(k, len(base))).
        Queries are scored a group at a time, each group touching about `budget` postings."""
        import numpy as np

        rows = _sparse(queries)
        k = max(0, min(int(k), self.size))
        index = np.zeros((len(rows), k), dtype=np.int64)
        sims = np.zeros((len(rows), k), dtype=np.float32)
        if k == 0 or len(rows) == 0:
            return index, sims
        postings = self._starts[rows.indices + 1] - self._starts[rows.indices]
        work = (
            np.bincount(np.repeat(np.arange(len(rows)), np.diff(rows.indptr)), weights=postings, minlength=len(rows))
            + self.size
        )  # a row of scores costs too
        group = np.cumsum(work) // max(1, budget)
        bounds = [0, *(np.flatnonzero(np.diff(group)) + 1).tolist(), len(rows)]
        for q0, q1 in zip(bounds, bounds[1:]):
            scores = self.scores(_slice(rows, q0, q1))
            order = np.argsort(-np.round(scores, 6), axis=1, kind="stable")[:, :k]
            index[q0:q1] = order
            sims[q0:q1] = np.take_along_axis(scores, order, axis=1)
        return index, sims


def _slice(rows: SparseRows, start: int, stop: int) -> SparseRows:
    stop = min(stop, len(rows))
    lo, hi = int(rows.indptr[start]), int(rows.indptr[stop])
    return SparseRows(rows.indptr[start : stop + 1] - lo, rows.indices[lo:hi], rows.data[lo:hi], rows.dim)


def cosine_top_k(
    queries: NDArray[np.float32] | SparseRows, base: NDArray[np.float32] | SparseRows, k: int, *, budget: int = 2**22
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """(index, sims): for each query row, the `k` base rows of highest cosine (unit rows, as
    `transform` gives), best first; equal cosines (to 6 decimals) rank the lower base row first.
    Both arrays are (len(queries), min(k, len(base))). `CosineIndex(base)` keeps the index for
    later queries."""
    return CosineIndex(base).top_k(queries, k, budget=budget)
