"""Searching collections: BM25 over the full-text index (always), exact cosine over the stored
vectors with numpy (when the collection has vectors of the embedder's model), the two lists fused
by their scores (`fuse`: each list's scores scaled to 0..1 over its own candidates, then
VECTOR_WEIGHT of the cosine's and the rest of BM25's; a passage missing from a list gets 0 there).
Meaning weighs more because people ask in their own words: on questions phrased so, over the
Python docs, the vectors alone found more right pages than an even fusion (figures and the weights
tried: docs/decisions/documents-bench.md). A result holds one passage of each text (a page copied into two
files, or a paragraph repeated, is given once) and at most two of one file while other files'
passages can take the place, so five results name more than one page.

The person's words never reach MATCH as syntax: the query is split into words and each word is
quoted, the words joined with OR (BM25 ranks passages that have more of them, and rarer ones,
first). The commonest English words ("the", "how", "did") are left out when the question has
other words, so a passage that shares only those with it is not found at all. A query with no
words (only punctuation) finds nothing.

The vector matrix of a (collection, model) is loaded once and kept until the index's generation
changes (any write to chunks or vectors), so repeated searches do not read the BLOBs again.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.docs.embedding import Embedder
from app.docs.index_db import DocumentIndex
from app.docs.text_tables import HEADING_WEIGHT
from app.docs.types import Passage

if TYPE_CHECKING:
    import numpy as np

VECTOR_WEIGHT = 0.7  # the cosine's share of a fused score; BM25 has the rest
MIN_CANDIDATES = 50  # each list's length before fusion: max(this, 10 * limit)
PER_FILE = 2  # passages of one file in a result while other files' are there to take the place
MAX_TERMS = 64
_WORD = re.compile(r"\w+", re.UNICODE)


# Function words of English questions: alone they match nearly every passage. Short on purpose:
# a word that carries meaning in some documents ("will", "can", "may" as nouns) is not in it.
STOPWORDS = frozenset(
    """
a an and are as at be been but by did do does doing for from had has have how i if in into is it its
me my of on or our so than that the their them then there these they this those to was we were what
when where which who whom why with you your about any all also am could should would
""".split()
)


def fts_query(text: str) -> str | None:
    """The MATCH expression for the person's `text`: each word quoted, joined by OR (the commonest
    English words left out unless there is nothing else); None when there is no word in it."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    meaningful = [w for w in words if w not in STOPWORDS]
    words = (meaningful or words)[:MAX_TERMS]
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def search(index: DocumentIndex, names: Sequence[str], query: str, *, limit: int = 5, embedder: Embedder | None = None) -> list[Passage]:
    """The best `limit` passages of collections `names` for `query`, best first. UnknownCollection
    for a name that is not a collection."""
    names = list(dict.fromkeys(names))
    models = {name: index.require(name).embedding_model for name in names}
    match = fts_query(query)
    if match is None or limit <= 0 or not names:
        return []
    n = max(MIN_CANDIDATES, 10 * limit)
    bm25 = bm25_ranked(index, names, match, n)
    vector: list[tuple[int, float]] = []
    if embedder is not None:
        with_vectors = [name for name in names if models[name] == embedder.model_name]
        if with_vectors:
            vector = vector_ranked(index, with_vectors, embedder, query, n)
    return _passages(index, fuse(bm25, vector), limit, [cid for cid, _ in bm25], [cid for cid, _ in vector])


def bm25_ranked(index: DocumentIndex, names: Sequence[str], match: str, n: int) -> list[tuple[int, float]]:
    """(chunk id, score) of `names` matching `match`, best BM25 first, at most `n`; the score is
    -bm25() (higher is better). Each collection is ranked in its own full-text table, with its own
    statistics (app/docs/text_tables.py); the collections' lists are merged by score."""
    scored: list[tuple[float, int]] = []
    for name in names:
        table = index.text_table(name)
        score = f"bm25({table}, 1.0, {HEADING_WEIGHT})"
        rows = index.conn.execute(f"SELECT rowid, {score} FROM {table} WHERE {table} MATCH ? ORDER BY {score} LIMIT ?", (match, n))
        scored.extend((float(score), int(rowid)) for rowid, score in rows)
    scored.sort()  # bm25() is lower for a better match
    return [(rowid, -score) for score, rowid in scored[:n]]


def vector_ranked(index: DocumentIndex, names: Sequence[str], embedder: Embedder, query: str, n: int) -> list[tuple[int, float]]:
    """(chunk id, cosine) of `names` nearest to the query's embedding (exact cosine), at most `n`,
    nearest first. Empty when the query cannot be embedded (keywords still search)."""
    import numpy as np  # imported here: a keyword-only search never needs it

    matrices = [m for m in (_matrix(index, name, embedder.model_name) for name in names) if m.ids.size]
    if not matrices:
        return []
    try:
        q = np.asarray(embedder.embed([query])[0], dtype=np.float32)
    except Exception:
        return []
    scored: list[tuple[np.ndarray, np.ndarray]] = []
    for m in matrices:
        if m.vectors.shape[1] != q.shape[0]:
            continue
        scores = m.vectors @ q
        top = np.argpartition(-scores, min(n, scores.size) - 1)[:n] if scores.size > n else np.arange(scores.size)
        scored.append((m.ids[top], scores[top]))
    if not scored:
        return []
    ids = np.concatenate([s[0] for s in scored])
    scores = np.concatenate([s[1] for s in scored])
    order = np.lexsort((ids, -scores))[:n]
    return [(int(i), float(s)) for i, s in zip(ids[order], scores[order], strict=True)]


def fuse(bm25: Sequence[tuple[int, float]], vector: Sequence[tuple[int, float]], weight: float = VECTOR_WEIGHT) -> list[tuple[int, float]]:
    """Score fusion of the two lists of (id, score), best first (ties by id): each list's scores
    scaled to 0..1 over its own candidates (its best 1, its last 0; all 1 when they are equal),
    then `weight` of the vector's and 1 - `weight` of BM25's, 0 for a list an id is not in. With
    one list empty, the other's order is kept. Scores, not ranks: a rank fusion throws away how far
    apart the scores are, and ranks a passage only BM25 liked (for the question's commonest words)
    as high as one the meaning found."""
    score: dict[int, float] = {}
    for scored, share in ((bm25, 1.0 - weight), (vector, weight)):
        if not scored:
            continue
        values = [s for _, s in scored]
        low, span = min(values), max(values) - min(values)
        for cid, s in scored:
            score[cid] = score.get(cid, 0.0) + share * ((s - low) / span if span > 0 else 1.0)
    return sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))


def diverse(candidates: Sequence[tuple[int, str, str]], limit: int, per_file: int = PER_FILE) -> list[int]:
    """The first `limit` of `candidates` ((chunk id, file key, text hash), best first), a passage
    whose text an earlier one has left out, and at most `per_file` of one file while others are
    there to take the place: when the others run out, the file's next passages fill up to `limit`."""
    seen: set[str] = set()
    per: dict[str, int] = {}
    chosen: list[int] = []
    spare: list[int] = []
    for cid, key, digest in candidates:
        if digest in seen:
            continue
        seen.add(digest)
        if per.get(key, 0) >= per_file:
            spare.append(cid)
            continue
        per[key] = per.get(key, 0) + 1
        chosen.append(cid)
        if len(chosen) == limit:
            return chosen
    return chosen + spare[: limit - len(chosen)]


def _passages(index: DocumentIndex, fused: list[tuple[int, float]], limit: int, bm25: list[int], vector: list[int]) -> list[Passage]:
    pool = fused[: max(limit, MIN_CANDIDATES)]
    if not pool:
        return []
    marks = ",".join("?" * len(pool))
    about = {
        int(r[0]): (f"{r[1]}\0{r[2]}", str(r[3]))
        for r in index.conn.execute(
            f"SELECT c.id, f.collection, f.path, c.hash FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id IN ({marks})",
            [cid for cid, _ in pool],
        )
    }
    scores = dict(pool)
    picked = diverse([(cid, *about[cid]) for cid, _ in pool if cid in about], limit)
    top = [(cid, scores[cid]) for cid in picked]
    if not top:
        return []
    rank_b = {cid: r for r, cid in enumerate(bm25, start=1)}
    rank_v = {cid: r for r, cid in enumerate(vector, start=1)}
    marks = ",".join("?" * len(top))
    rows = {
        int(r[0]): r
        for r in index.conn.execute(
            'SELECT c.id, f.collection, f.path, c.text, c.start, c."end", c.hash, c.page, c.heading '
            f"FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id IN ({marks})",
            [cid for cid, _ in top],
        )
    }
    out: list[Passage] = []
    for cid, score in top:
        r = rows.get(cid)
        if r is None:
            continue
        out.append(
            Passage(
                chunk_id=cid,
                collection=r[1],
                path=r[2],
                text=r[3],
                start=r[4],
                end=r[5],
                hash=r[6],
                score=score,
                page=r[7],
                heading=r[8],
                rank_bm25=rank_b.get(cid),
                rank_vector=rank_v.get(cid),
            )
        )
    return out


# ---- the vector matrices, kept per (index file, collection, model) until the index changes ----


@dataclass(frozen=True)
class _Matrix:
    generation: int
    ids: np.ndarray  # int64 chunk ids
    vectors: np.ndarray  # float32, one unit row per id


_MATRICES: dict[tuple[str, str, str], _Matrix] = {}
_MATRICES_LOCK = threading.Lock()


def _matrix(index: DocumentIndex, name: str, model: str) -> _Matrix:
    import numpy as np

    key = (str(index.path.resolve()), name, model)
    generation = index.generation()
    with _MATRICES_LOCK:
        cached = _MATRICES.get(key)
    if cached is not None and cached.generation == generation:
        return cached
    rows = index.conn.execute(
        "SELECT v.chunk_id, v.dim, v.vector FROM vectors v JOIN chunks c ON c.id = v.chunk_id JOIN files f ON f.id = c.file_id "
        "WHERE f.collection = ? AND v.model = ? ORDER BY v.chunk_id",
        (name, model),
    ).fetchall()
    dims = {int(r[1]) for r in rows}
    if len(dims) != 1:  # none, or (never written so) mixed sizes: no vector search
        matrix = _Matrix(generation, np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32))
    else:
        dim = dims.pop()
        ids = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))
        vectors = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f4").reshape(len(rows), dim)
        matrix = _Matrix(generation, ids, vectors.astype(np.float32, copy=False))
    with _MATRICES_LOCK:
        for stale in [k for k in _MATRICES if k[0] == key[0] and k != key and _MATRICES[k].generation != generation]:
            del _MATRICES[stale]
        _MATRICES[key] = matrix
    return matrix
