"""Issue 53: does an embedding-based classifier of the request pay against task_kind's simple text
features (app/routing/task_kind.py) for Auto's choice between a small and a large model? Measured
on the task set (bench/auto_tasks.json) with the replies both models gave to every task in a
committed run of bench/auto_route.py (default: bench/data/auto_route_2026-12-07.json, Qwen2.5-Coder
0.5B as the small model and 1.5B as the large one; a task's seconds are what the person waited for
the whole reply).

Every learned predictor is scored leave-one-out: the task being predicted is never in what it
learned from. Printed:

1. Kind: task_kind.classify's kind (a `fix` is code, as the router maps it) against the embedding's
   k nearest neighbours by cosine (k = 1, 3, 5, 7) and its nearest kind centroid; then the tagged
   difficulty (easy / medium / hard) by k nearest neighbours, on the embedding and on the features
   (classify's kind, then its difficulty number), against always guessing the most common tag.
2. Routing, replayed offline (as RouteLLM evaluates routers): a router sends each task to the small
   or the large model and gets that model's recorded correctness and seconds. For each: correct
   answers, accuracy, accuracy kept against always-large, mean seconds a task (the router's own
   cost per request included), time share against always-large, the share sent to the large.
   - always-small, always-large;
   - the oracle floor: it knows every outcome; the cheapest picks that keep >= 95% of always-large's
     correct answers (exact: each pick that costs accuracy costs exactly one answer, so the
     cheapest flips are taken in order);
   - upper bounds chosen on the outcomes themselves: the best policy per (kind, tagged difficulty)
     group (all 2^9 assignments searched) and the best per classify's kind (what a kind-only router
     could at best do); and the first with its policy learned leave-one-out (true tags: what a
     perfect difficulty predictor would give);
   - features (live): the route Auto chose in the run (its recorded choosing time added, as
     bench/auto_route.py adds it); features (choose offline): app/routing/auto.choose on two
     synthetic candidates (0.49B and 1.54B, loaded, no measured speeds: its estimates make the 0.5B
     about 2.2 times as fast, as measured it was 2.1), with the prompt's estimated tokens;
   - learned routers, with the same learner on three representations: the embedding (cosine); the
     features (the neighbours of a task are the tasks of classify's kind, nearest by its difficulty
     number); and classify's kind, then the embedding within it (does the embedding add anything to
     the features?). On each: (a) k nearest
     neighbours voting "the small model is right here" (label small.ok, or small.ok or not
     large.ok), sent to the small when at least a threshold share of them say so; (b) k nearest
     neighbours voting the kind and tagged difficulty, then the best group policy learned without
     the task. k, the threshold and the label are chosen by nested leave-one-out (for each held-out
     task, by a leave-one-out on the other 79: the cheapest that keeps >= 95% there), so the figure
     is honest; the whole sweep is printed too, and its best row is chosen on the same 80 tasks
     (optimistic, said so).
3. Cost: the embedder's load time and its median time to embed one request (each prompt alone, the
   second time it is seen; the first time printed too), against classify()'s and choose()'s median.
   The embedding routers' seconds include that median.

Run: .venv/bin/python bench/auto_classify.py [--results FILE] [--threads N] [--model GGUF] [--json]
The embedder is Cove's default (all-MiniLM-L6-v2, models/default_embedder.py) as `cove setup` put
it in Cove's models folder (or where bench/docs_embed.py and bench/real_models.py cached it); this
bench fetches nothing. Goal (issue 53): an extra model call on the hot path only if it measurably
pays; the router's own goal is >= 95% of always-large's accuracy at <= 60% of its time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from auto_check import load_tasks  # noqa: E402

RESULTS = ROOT / "bench" / "data" / "auto_route_2026-12-07.json"
KEEP = 0.95  # of always-large's correct answers
GOAL_SHARE = 0.60  # of always-large's time
KS = (3, 5, 7)
THRESHOLDS = (1 / 3, 1 / 2, 2 / 3, 1.0)  # the share of the k neighbours that must say "small is right"
LABELS = ("small_ok", "small_enough")  # small.ok; small.ok or not large.ok
LEVELS = ("easy", "medium", "hard")
SIDES = ("small", "large")
SMALL_B, LARGE_B = 0.49, 1.54
MAX_TOKENS = 384  # bench/auto_route.py's reply limit
Row = dict[str, Any]


# --- neighbours ---------------------------------------------------------------------------------


def cosine(vectors: Any) -> np.ndarray:
    """The cosine similarity of every pair of rows."""
    x = np.asarray(vectors, dtype=np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return x @ x.T


def feature_similarity(kinds: Sequence[str], difficulties: Sequence[float]) -> np.ndarray:
    """The features as a similarity: tasks of the same kind first (a difficulty is within 0..1, so a
    different kind always ranks after), then by how close their difficulty numbers are."""
    d = np.asarray(difficulties, dtype=np.float64)
    k = np.asarray(kinds)
    return -np.abs(d[:, None] - d[None, :]) - 2.0 * (k[:, None] != k[None, :])


class Neighbours:
    """Each task's nearest others by a similarity matrix, most similar first, ties by index; the
    task itself, and any task left out, never among them."""

    def __init__(self, sim: np.ndarray) -> None:
        self.sim = np.asarray(sim, dtype=np.float64)
        n = len(self.sim)
        self.order = [np.lexsort((np.arange(n), -self.sim[i])) for i in range(n)]

    def of(self, i: int, k: int, left_out: frozenset[int] = frozenset()) -> list[int]:
        out: list[int] = []
        for j in self.order[i]:
            j = int(j)
            if j != i and j not in left_out:
                out.append(j)
                if len(out) == k:
                    break
        return out


def vote(labels: Sequence[Hashable], near: Sequence[int]) -> Hashable:
    """The most common label among `near` (nearest first); a tie goes to the nearest of the tied."""
    counts = Counter(labels[j] for j in near)
    top = max(counts.values())
    return next(labels[j] for j in near if counts[labels[j]] == top)


def loo_vote(sim: np.ndarray, labels: Sequence[Hashable], k: int) -> list[Hashable]:
    """Each task's label voted by its k nearest other tasks (leave-one-out)."""
    nb = Neighbours(sim)
    return [vote(labels, nb.of(i, k)) for i in range(len(labels))]


def loo_centroid(vectors: Any, labels: Sequence[Hashable]) -> list[Hashable]:
    """Each task's label by the nearest (cosine) label centroid of the other tasks."""
    x = np.asarray(vectors, dtype=np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    names = sorted(set(labels), key=str)
    out: list[Hashable] = []
    for i in range(len(x)):
        best, best_sim = None, -math.inf
        for name in names:
            members = [j for j in range(len(x)) if j != i and labels[j] == name]
            if not members:
                continue
            c = x[members].mean(axis=0)
            s = float(x[i] @ c / max(np.linalg.norm(c), 1e-12))
            if s > best_sim:
                best, best_sim = name, s
        out.append(best)
    return out


def accuracy(predicted: Sequence[Hashable], truth: Sequence[Hashable]) -> dict[str, Any]:
    right = sum(p == t for p, t in zip(predicted, truth))
    return {"correct": right, "n": len(truth), "accuracy": round(right / len(truth), 4) if truth else 0.0}


# --- replay -------------------------------------------------------------------------------------


def replay(rows: Sequence[Row], picks: Sequence[str], extra_s: float | Sequence[float] = 0.0) -> dict[str, Any]:
    """What a router that sent task i to picks[i] would have got: the chosen model's recorded
    correctness and seconds, plus the router's own time per request (`extra_s`)."""
    if len(picks) != len(rows):
        raise ValueError(f"{len(picks)} picks for {len(rows)} tasks")
    extras = [float(extra_s)] * len(rows) if isinstance(extra_s, int | float) else [float(e) for e in extra_s]
    correct = sum(bool(row[side]["ok"]) for row, side in zip(rows, picks))
    seconds = [float(row[side]["s"]) + e for row, side, e in zip(rows, picks, extras)]
    n = len(rows)
    return {
        "correct": correct,
        "n": n,
        "accuracy": round(correct / n, 4) if n else 0.0,
        "mean_s": round(statistics.mean(seconds), 3) if n else 0.0,
        "to_large": round(sum(p == "large" for p in picks) / n, 3) if n else 0.0,
    }


def against_large(result: dict[str, Any], large: dict[str, Any]) -> dict[str, Any]:
    kept = result["correct"] / large["correct"] if large["correct"] else None
    share = result["mean_s"] / large["mean_s"] if large["mean_s"] else None
    return {
        **result,
        "accuracy_kept": round(kept, 3) if kept is not None else None,
        "time_share": round(share, 3) if share is not None else None,
        "goal": kept is not None and share is not None and kept >= KEEP - 1e-9 and share <= GOAL_SHARE + 1e-9,
    }


def target_correct(rows: Sequence[Row], keep: float = KEEP) -> int:
    """The fewest correct answers that keep `keep` of always-large's."""
    return math.ceil(keep * sum(bool(r["large"]["ok"]) for r in rows) - 1e-9)


def oracle(rows: Sequence[Row], keep: float = KEEP) -> list[str]:
    """The cheapest picks (knowing every outcome) with at least target_correct(rows, keep) correct:
    each task's faster model, then, while short, the cheapest flips from a wrong fast pick to a
    right slower one. Exact: every flip gains exactly one answer."""
    picks = [min(SIDES, key=lambda side: (float(r[side]["s"]), side)) for r in rows]
    short = target_correct(rows, keep) - sum(bool(r[p]["ok"]) for r, p in zip(rows, picks))
    flips = sorted(
        (float(r[other]["s"]) - float(r[p]["s"]), i, other)
        for i, (r, p) in enumerate(zip(rows, picks))
        for other in SIDES
        if other != p and r[other]["ok"] and not r[p]["ok"]
    )
    for _, i, other in flips[: max(short, 0)]:
        picks[i] = other
    return picks


def best_group_policy(rows: Sequence[Row], groups: Sequence[Hashable], keep: float = KEEP) -> dict[Hashable, str]:
    """{group: side}: of every assignment of a model to each group, the one with the least time
    among those with at least target_correct(rows, keep) correct answers (ties: more correct,
    then the first found, the large model's bit set last); when none has, the most correct."""
    names = sorted(set(groups), key=str)
    if len(names) > 16:
        raise ValueError(f"{len(names)} groups: too many to search every assignment")
    index = {g: n for n, g in enumerate(names)}
    sums = np.zeros((4, len(names)))  # small ok, large ok, small s, large s
    for r, g in zip(rows, groups):
        sums[:, index[g]] += (bool(r["small"]["ok"]), bool(r["large"]["ok"]), float(r["small"]["s"]), float(r["large"]["s"]))
    to_large = (np.arange(2 ** len(names))[:, None] >> np.arange(len(names))[None, :]) & 1
    correct = to_large @ sums[1] + (1 - to_large) @ sums[0]
    seconds = to_large @ sums[3] + (1 - to_large) @ sums[2]
    need = target_correct(rows, keep)
    feasible = correct >= need - 1e-9
    if feasible.any():
        keys = np.where(feasible, seconds, np.inf)
        best = int(np.lexsort((np.arange(len(keys)), -correct, keys))[0])
    else:
        best = int(np.lexsort((np.arange(len(correct)), seconds, -correct))[0])
    return {g: "large" if to_large[best, index[g]] else "small" for g in names}


def select(results: Sequence[dict[str, Any]], need: int) -> int:
    """The index of the cheapest result with at least `need` correct; else of the most correct
    (then the cheapest); ties to the first."""
    feasible = [i for i, r in enumerate(results) if r["correct"] >= need]
    if feasible:
        return min(feasible, key=lambda i: (results[i]["mean_s"], -results[i]["correct"], i))
    return min(range(len(results)), key=lambda i: (-results[i]["correct"], results[i]["mean_s"], i))


# --- learned routers ----------------------------------------------------------------------------


def small_labels(rows: Sequence[Row], label: str) -> list[bool]:
    if label == "small_ok":
        return [bool(r["small"]["ok"]) for r in rows]
    if label == "small_enough":
        return [bool(r["small"]["ok"]) or not r["large"]["ok"] for r in rows]
    raise ValueError(label)


def knn_small_pick(nb: Neighbours, flags: Sequence[bool], i: int, k: int, threshold: float, left_out: frozenset[int]) -> str:
    near = nb.of(i, k, left_out)
    share = sum(flags[j] for j in near) / len(near) if near else 0.0
    return "small" if share >= threshold - 1e-9 else "large"


def knn_small_configs() -> list[dict[str, Any]]:
    return [{"label": lab, "k": k, "threshold": t} for lab in LABELS for k in KS for t in THRESHOLDS]


def knn_small_loo(rows: Sequence[Row], nb: Neighbours, config: dict[str, Any], left_out: frozenset[int] = frozenset()) -> list[str]:
    """Leave-one-out picks of router (a) for every task not in `left_out` (in order), each learned
    from the others not left out."""
    flags = small_labels(rows, config["label"])
    return [knn_small_pick(nb, flags, i, config["k"], config["threshold"], left_out) for i in range(len(rows)) if i not in left_out]


def nested(
    rows: Sequence[Row],
    configs: Sequence[dict[str, Any]],
    picks_for: Callable[[dict[str, Any], frozenset[int]], list[str]],
    pick_one: Callable[[dict[str, Any], int], str],
    keep: float = KEEP,
) -> tuple[list[str], list[dict[str, Any]]]:
    """Nested leave-one-out: for each task i, every config is scored by a leave-one-out on the
    other tasks (`picks_for(config, {i})`: the picks for every task but i, each learned without
    itself and without i), the cheapest that keeps `keep` there is chosen, and i is picked by it
    (`pick_one(config, i)`, learned from all but i). (picks, the config chosen for each task)."""
    picks: list[str] = []
    chosen: list[dict[str, Any]] = []
    for i in range(len(rows)):
        out = frozenset({i})
        inner_rows = [r for j, r in enumerate(rows) if j != i]
        scored = [replay(inner_rows, picks_for(c, out)) for c in configs]
        best = configs[select(scored, target_correct(inner_rows, keep))]
        chosen.append(best)
        picks.append(pick_one(best, i))
    return picks, chosen


def knn_group_pick(
    rows: Sequence[Row], nb: Neighbours, groups: Sequence[Hashable], i: int, k: int, left_out: frozenset[int], policies: dict[Any, Any]
) -> str:
    """Router (b) for task i: its group voted by its k nearest tasks, then the best group policy
    learned on the tasks other than i and `left_out` (cached in `policies`)."""
    skip = left_out | {i}
    key = tuple(sorted(skip))
    if key not in policies:
        keep_idx = [j for j in range(len(rows)) if j not in skip]
        policies[key] = best_group_policy([rows[j] for j in keep_idx], [groups[j] for j in keep_idx])
    group = vote(groups, nb.of(i, k, left_out))
    return policies[key].get(group, "large")


def kind_groups(tasks: Sequence[Row]) -> list[tuple[str, str]]:
    return [(str(t["kind"]), str(t["difficulty"])) for t in tasks]


# --- the evaluation -----------------------------------------------------------------------------


def aligned(rows: Sequence[Row], tasks: Sequence[Row]) -> tuple[list[Row], list[Row]]:
    """The rows and their tasks in the same order (by id); every row's task must be in the set."""
    by_id = {t["id"]: t for t in tasks}
    missing = [r["id"] for r in rows if r["id"] not in by_id]
    if missing:
        raise SystemExit(f"auto_classify: the results name tasks not in the task set: {', '.join(missing[:5])}")
    return list(rows), [by_id[r["id"]] for r in rows]


def features_of(tasks: Sequence[Row]) -> list[Any]:
    from app.routing.task_kind import classify

    return [classify(t["prompt"]) for t in tasks]


def synthetic_pair() -> list[Any]:
    """The small and the large model as Auto's candidates (built as tests/app/routing/test_auto.py
    builds them): loaded, native tools, no measured speeds, so auto.choose uses its estimates."""
    from app.routing.candidates import Candidate, Speed

    return [
        Candidate(name=name, params_b=b, context=32768, vision=False, tools="native", reasons=False, loaded=True, speed=Speed())
        for name, b in (("small", SMALL_B), ("large", LARGE_B))
    ]


def choose_offline(tasks: Sequence[Row]) -> list[str]:
    """app/routing/auto.choose on two synthetic candidates (no measured speeds: its estimates)."""
    from app.routing.auto import choose
    from app.routing.candidates import Needs
    from app.routing.for_message import CHARS_PER_TOKEN

    pair = synthetic_pair()
    return [choose(t["prompt"], Needs(tokens=len(t["prompt"]) // CHARS_PER_TOKEN + 16, reply=MAX_TOKENS), pair).model for t in tasks]


def fixed_routers(rows: Sequence[Row], tasks: Sequence[Row], classify_s: float = 0.0) -> list[dict[str, Any]]:
    """The routers that learn nothing from the prompts' representation: always-small,
    always-large, the oracle floor, the group policies on the tags and on classify's kind (chosen
    on these outcomes; and on the tags learned leave-one-out), Auto's live route and
    auto.choose offline. `rows` and `tasks` in the same order (aligned)."""
    n = len(rows)
    groups = kind_groups(tasks)
    feats = features_of(tasks)
    router_kind = ["fix" if f.fix else f.kind for f in feats]
    large = replay(rows, ["large"] * n)
    routers: list[dict[str, Any]] = []

    def add(name: str, how: str, picks: Sequence[str], extra_s: float | Sequence[float] = 0.0, **more: Any) -> None:
        routers.append({"router": name, "how": how, **against_large(replay(rows, picks, extra_s), large), **more})

    add("always-small", "every task to the small model", ["small"] * n)
    add("always-large", "every task to the large model", ["large"] * n)
    add("oracle floor", "knows every outcome: the cheapest picks keeping >= 95%", oracle(rows))
    tag_policy = best_group_policy(rows, groups)
    add(
        "best kind x difficulty policy (tags)",
        "upper bound for a kind x difficulty router: the policy chosen on these outcomes, true tags",
        [tag_policy[g] for g in groups],
        policy={f"{k}/{d}": s for (k, d), s in tag_policy.items()},
    )
    kind_policy = best_group_policy(rows, router_kind)
    add(
        "best kind policy (classify's kind)",
        "upper bound for a kind-only router: the policy chosen on these outcomes",
        [kind_policy[k] for k in router_kind],
        policy={str(k): s for k, s in kind_policy.items()},
    )
    policies: dict[Any, Any] = {}
    add(
        "kind x difficulty policy (tags), learned LOO",
        "a perfect difficulty predictor: the policy learned without the task",
        [tag_policy_loo_pick(rows, groups, i, policies) for i in range(n)],
    )
    add(
        "features (live)",
        "the route Auto chose in the run, its recorded choosing time added",
        [str(r["route"]) for r in rows],
        [float(r.get("route_s") or 0.0) for r in rows],
    )
    offline = choose_offline(tasks)
    agree = sum(a == str(r["route"]) for a, r in zip(offline, rows))
    add("features (choose offline)", f"auto.choose on estimated speeds; the same pick as live on {agree}/{n}", offline, classify_s)
    return routers


def evaluate(
    rows: Sequence[Row], tasks: Sequence[Row], vectors: Any = None, embed_s: float = 0.0, classify_s: float = 0.0
) -> dict[str, Any]:
    """Every figure but the timings: kind and difficulty accuracy, and each router's replay.
    Without `vectors` (the prompts' embeddings) the embedding's rows are left out."""
    rows, tasks = aligned(rows, tasks)
    n = len(rows)
    feats = features_of(tasks)
    true_kind = [str(t["kind"]) for t in tasks]
    true_level = [str(t["difficulty"]) for t in tasks]
    groups = kind_groups(tasks)
    router_kind = ["fix" if f.fix else f.kind for f in feats]
    f_sim = feature_similarity(router_kind, [f.difficulty for f in feats])
    sims = {"features": f_sim}
    if vectors is not None:
        sims["embedding"] = cosine(vectors)
        # classify's kind first, then the embedding within it: does the embedding add to the features?
        kinds_arr = np.asarray(router_kind)
        sims["kind + embedding"] = sims["embedding"] - 4.0 * (kinds_arr[:, None] != kinds_arr[None, :])
    extra = {"features": classify_s, "embedding": embed_s, "kind + embedding": embed_s + classify_s}

    kinds: dict[str, Any] = {"features (task_kind.classify)": accuracy([f.kind for f in feats], true_kind)}
    common = Counter(true_level).most_common(1)[0][0]
    levels: dict[str, Any] = {f"the most common tag ({common}) for all: chance": accuracy([common] * n, true_level)}
    for k in KS:
        levels[f"features kNN k={k}"] = accuracy(loo_vote(f_sim, true_level, k), true_level)
    if vectors is not None:
        e_sim = sims["embedding"]
        for k in (1, *KS):
            kinds[f"embedding kNN k={k}"] = accuracy(loo_vote(e_sim, true_kind, k), true_kind)
        kinds["embedding nearest centroid"] = accuracy(loo_centroid(vectors, true_kind), true_kind)
        for k in KS:
            levels[f"embedding kNN k={k}"] = accuracy(loo_vote(e_sim, true_level, k), true_level)
        for k in KS:
            levels[f"embedding kNN k={k}, kind and difficulty"] = accuracy(loo_vote(e_sim, groups, k), groups)

    large = replay(rows, ["large"] * n)
    routers = fixed_routers(rows, tasks, classify_s)

    def add(name: str, how: str, picks: Sequence[str], extra_s: float | Sequence[float] = 0.0) -> None:
        routers.append({"router": name, "how": how, **against_large(replay(rows, picks, extra_s), large)})

    sweeps: dict[str, list[dict[str, Any]]] = {}
    chosen_configs: dict[str, Any] = {}
    for rep, sim in sims.items():
        nb = Neighbours(sim)
        configs = knn_small_configs()
        sweep = []
        for c in configs:
            r = against_large(replay(rows, knn_small_loo(rows, nb, c), extra[rep]), large)
            sweep.append({**c, "threshold": round(c["threshold"], 3), **r})
        sweeps[f"{rep} kNN small-is-right"] = sweep
        picks, chosen = nested(
            rows,
            configs,
            lambda c, out: knn_small_loo(rows, nb, c, out),
            lambda c, i: knn_small_pick(nb, small_labels(rows, c["label"]), i, c["k"], c["threshold"], frozenset()),
        )
        chosen_configs[f"{rep} kNN small-is-right"] = _tally(chosen)
        add(f"{rep} kNN small-is-right", "nested LOO over label, k, threshold", picks, extra[rep])

        group_policies: dict[Any, Any] = {}
        group_configs = [{"k": k} for k in KS]
        gsweep = []
        for c in group_configs:
            p = [knn_group_pick(rows, nb, groups, i, c["k"], frozenset(), group_policies) for i in range(n)]
            gsweep.append({**c, **against_large(replay(rows, p, extra[rep]), large)})
        sweeps[f"{rep} kNN difficulty -> group policy"] = gsweep
        picks, chosen = nested(
            rows,
            group_configs,
            lambda c, out: [knn_group_pick(rows, nb, groups, i, c["k"], out, group_policies) for i in range(n) if i not in out],
            lambda c, i: knn_group_pick(rows, nb, groups, i, c["k"], frozenset(), group_policies),
        )
        chosen_configs[f"{rep} kNN difficulty -> group policy"] = _tally(chosen)
        add(f"{rep} kNN difficulty -> group policy", "nested LOO over k; policy learned without the task", picks, extra[rep])

    return {
        "tasks": n,
        "large_correct": large["correct"],
        "target_correct": target_correct(rows),
        "kind_accuracy": kinds,
        "difficulty_accuracy": levels,
        "routers": routers,
        "sweeps": sweeps,
        "nested_choices": chosen_configs,
    }


def tag_policy_loo_pick(rows: Sequence[Row], groups: Sequence[Hashable], i: int, policies: dict[Any, Any]) -> str:
    """Task i's true group through the best group policy learned without it."""
    key = (i,)
    if key not in policies:
        others = [j for j in range(len(rows)) if j != i]
        policies[key] = best_group_policy([rows[j] for j in others], [groups[j] for j in others])
    return policies[key].get(groups[i], "large")


def _tally(chosen: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """How often each config was chosen across the outer folds, most often first."""
    counts = Counter(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in c.items()}, sort_keys=True) for c in chosen)
    return [{**json.loads(key), "folds": m} for key, m in counts.most_common()]


# --- timings ------------------------------------------------------------------------------------


def time_classify(tasks: Sequence[Row], repeats: int = 20) -> dict[str, float]:
    from app.routing.auto import choose
    from app.routing.candidates import Needs
    from app.routing.task_kind import classify

    pair = synthetic_pair()
    needs = Needs(tokens=100, reply=MAX_TOKENS)
    out: dict[str, float] = {}
    for name, call in (("classify", lambda p: classify(p)), ("choose", lambda p: choose(p, needs, pair))):
        times = []
        for t in tasks:
            call(t["prompt"])
            for _ in range(repeats):
                start = time.perf_counter()
                call(t["prompt"])
                times.append(time.perf_counter() - start)
        out[f"{name}_us_median"] = round(statistics.median(times) * 1e6, 1)
    return out


def find_embedder(explicit: Path | None = None) -> Path | None:
    """The default embedder's GGUF: `explicit`, else where `cove setup` put it (Cove's models
    folder), else where a bench cached it. None: not on this machine."""
    if explicit is not None:
        return explicit if explicit.is_file() else None
    from app.paths import resolve_paths

    name = "all-minilm-l6-v2-f16.gguf"  # models/default_embedder.gguf_name(MINILM_ZIP)
    cache = Path.home() / ".cache" / "cove"
    for place in (resolve_paths().models_dir, cache / "bench", cache / "real-models"):
        if (place / name).is_file():
            return place / name
    return None


def embed_prompts(path: Path, prompts: Sequence[str], threads: int) -> tuple[np.ndarray, dict[str, float]]:
    """Every prompt's vector, each embedded alone as a request would be, and the timings."""
    from app.docs.embedding import QUERY_NICE, EngineEmbedder
    from models.library import InstalledModel

    model = InstalledModel(
        name=path.stem, path=str(path), sha256="", size=path.stat().st_size, mtime=0.0, quant=None, architecture="bert",
        parameter_count=None, context_length=512, has_chat_template=False, source="imported", repo=None, file=None,
        revision=None, added_at="", last_used_at=None,
    )  # fmt: skip
    embedder = EngineEmbedder(model, n_threads=threads, nice=QUERY_NICE)
    try:
        start = time.perf_counter()
        embedder.embed(["warm-up"])  # the host started, the model loaded, its context made
        load_s = time.perf_counter() - start
        passes = []
        for _ in range(2):  # the first time each prompt is seen, then again (the figure)
            vectors, times = [], []
            for p in prompts:
                start = time.perf_counter()
                vectors.append(embedder.embed([p])[0])
                times.append(time.perf_counter() - start)
            passes.append(sorted(times))
    finally:
        embedder.close()
    first, warm = passes

    def ms(times: list[float], q: float) -> float:
        return round(times[min(len(times) - 1, int(q * len(times)))] * 1000, 2)

    return np.asarray(vectors), {
        "load_s": round(load_s, 3),
        "embed_ms_median": round(statistics.median(warm) * 1000, 2),
        "embed_ms_p90": ms(warm, 0.9),
        "embed_ms_max": round(warm[-1] * 1000, 2),
        "first_sight_ms_median": round(statistics.median(first) * 1000, 2),
        "first_sight_ms_p90": ms(first, 0.9),
        "first_sight_ms_max": round(first[-1] * 1000, 2),
    }


# --- output -------------------------------------------------------------------------------------


def render(result: dict[str, Any]) -> str:
    lines = [f"{result['tasks']} tasks ({result['results']}); every learned figure leave-one-out", ""]
    lines.append("Kind (math / code / fact; a fix is code):")
    for name, a in result["kind_accuracy"].items():
        lines.append(f"  {name:<48} {a['correct']:>3}/{a['n']}  {a['accuracy']:7.1%}")
    lines.append("Tagged difficulty (easy / medium / hard):")
    for name, a in result["difficulty_accuracy"].items():
        lines.append(f"  {name:<48} {a['correct']:>3}/{a['n']}  {a['accuracy']:7.1%}")
    lines.append("")
    lines.append(
        f"Routing, replayed on the recorded replies (always-large {result['large_correct']}/{result['tasks']}; "
        f"keeping 95% needs >= {result['target_correct']}; goal: >= 95% kept at <= 60% of the time):"
    )
    lines.append(f"  {'router':<48} {'correct':>7} {'acc':>6} {'kept':>6} {'mean s':>7} {'time':>6} {'large':>6}  goal")
    for r in result["routers"]:
        lines.append(
            f"  {r['router']:<48} {r['correct']:>3}/{r['n']:<3} {r['accuracy']:6.1%} {r['accuracy_kept']:6.1%} "
            f"{r['mean_s']:7.2f} {r['time_share']:6.1%} {r['to_large']:6.0%}  {'met' if r['goal'] else '-'}"
        )
        policy = r.get("policy")
        said = f"; small for {', '.join(sorted(g for g, side in policy.items() if side == 'small')) or 'none'}" if policy else ""
        lines.append(f"      {r['how']}{said}")
    lines.append("")
    lines.append("Sweeps (each row leave-one-out; picking the best row picks on these same 80 tasks: optimistic):")
    for name, sweep in result["sweeps"].items():
        lines.append(f"  {name}:")
        for s in sweep:
            conf = ", ".join(f"{k}={s[k]}" for k in ("label", "k", "threshold") if k in s)
            lines.append(
                f"    {conf:<44} {s['correct']:>3}/{s['n']:<3} kept {s['accuracy_kept']:6.1%}  mean {s['mean_s']:6.2f} s  "
                f"time {s['time_share']:6.1%}  {'met' if s['goal'] else '-'}"
            )
    lines.append("  Chosen by the nested leave-one-out (config: folds):")
    for name, tally in result["nested_choices"].items():
        said = "; ".join(", ".join(f"{k}={v}" for k, v in t.items() if k != "folds") + f": {t['folds']}" for t in tally)
        lines.append(f"    {name}: {said}")
    cost = result["cost"]
    lines.append("")
    line = f"Cost per request: classify() {cost['classify_us_median']:.0f} µs, choose() {cost['choose_us_median']:.0f} µs (medians)"
    if "embed_ms_median" in cost:
        line += f"; the embedder ({cost['embedder']}, {cost['threads']} threads) loads in {cost['load_s']:.2f} s"
        lines.append(line)
        line = (
            f"  embedding one request: {cost['embed_ms_median']:.1f} ms median, {cost['embed_ms_p90']:.1f} ms p90, "
            f"{cost['embed_ms_max']:.1f} ms max (each prompt the second time; the first time: {cost['first_sight_ms_median']:.1f} ms "
            f"median, {cost['first_sight_ms_p90']:.1f} ms p90, {cost['first_sight_ms_max']:.1f} ms max); the median is added to "
            "each embedding router's seconds"
        )
    lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="a bench/auto_route.py --json result (its first run's rows)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="the embedder's threads (default: every core)")
    parser.add_argument("--model", type=Path, help="the embedder's GGUF (default: the one `cove setup` installed)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    data = json.loads(args.results.read_text(encoding="utf-8"))
    rows, tasks = aligned(data["runs"][0]["rows"], load_tasks())
    path = find_embedder(args.model)
    if path is None:
        print("auto_classify: the default embedder (all-MiniLM-L6-v2) is not on this machine: run `cove setup` first.", file=sys.stderr)
        return 2
    cost: dict[str, Any] = time_classify(tasks)
    vectors, timings = embed_prompts(path, [t["prompt"] for t in tasks], args.threads)
    cost.update(timings, threads=args.threads, embedder=path.name)
    result = evaluate(rows, tasks, vectors, embed_s=timings["embed_ms_median"] / 1000, classify_s=cost["classify_us_median"] / 1e6)
    shown = args.results.resolve()
    result = {"results": str(shown.relative_to(ROOT)) if shown.is_relative_to(ROOT) else str(shown), **result, "cost": cost}
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
