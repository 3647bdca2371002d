"""bench/auto_classify.py's pure parts, without the embedder: the leave-one-out neighbours never
see the task they predict, the replay scores a router by the recorded replies, the oracle and the
group-policy search find the cheapest picks (checked against brute force), the nested selection
learns nothing from the held-out task; and on the committed run, always-large is 68/80 at a time
share of 1.0 and Auto's live route replays to the recorded figures."""

from __future__ import annotations

import itertools
import json
import random
import sys

import numpy as np
import pytest

from tests.support.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "bench"))

import auto_classify as ac  # noqa: E402


def row(small_ok: bool, small_s: float, large_ok: bool, large_s: float, **more: object) -> dict:
    return {"small": {"ok": small_ok, "s": small_s}, "large": {"ok": large_ok, "s": large_s}, **more}


def random_rows(rng: random.Random, n: int) -> list[dict]:
    return [row(rng.random() < 0.5, rng.uniform(1, 10), rng.random() < 0.8, rng.uniform(1, 20)) for _ in range(n)]


# --- neighbours ---------------------------------------------------------------------------------


def test_leave_one_out_neighbours_never_include_the_task_or_what_is_left_out() -> None:
    vectors = [[1, 0], [0.99, 0.1], [0.98, 0.2], [0, 1], [0.1, 0.99]]
    nb = ac.Neighbours(ac.cosine(vectors))
    assert nb.of(0, 2) == [1, 2]
    assert nb.of(0, 2, frozenset({1})) == [2, 4]
    assert all(i not in nb.of(i, 4) for i in range(5))
    assert len(nb.of(0, 10)) == 4  # fewer than k others: every other


def test_loo_knn_votes_by_the_others_and_a_twin_cannot_vote_for_itself() -> None:
    # Two clusters; each point of one has its label from the others.
    vectors = [[1, 0.0], [1, 0.1], [1, -0.1], [0.0, 1], [0.1, 1], [-0.1, 1]]
    labels = ["a", "a", "a", "b", "b", "b"]
    assert ac.loo_vote(ac.cosine(vectors), labels, 1) == labels
    assert ac.loo_vote(ac.cosine(vectors), labels, 3) == labels  # 2 of its own cluster out-vote 1 of the other
    # Identical twins with opposite labels: with k=1 each gets the other's, so its own label never leaks.
    twins = [[1, 0], [1, 0], [0, 1], [0, 1]]
    assert ac.loo_vote(ac.cosine(twins), ["x", "y", "p", "q"], 1) == ["y", "x", "q", "p"]


def test_a_tied_vote_goes_to_the_nearest() -> None:
    assert ac.vote(["a", "b", "b", "a"], [3, 1, 2, 0]) == "a"  # two each: task 3, the nearest, says a
    assert ac.vote(["a", "b", "b", "a"], [1, 3, 2]) == "b"


def test_loo_centroid_leaves_the_task_out_of_its_own_centroid() -> None:
    vectors = [[1, 0.0], [1, 0.2], [0.0, 1], [0.2, 1], [0.6, 0.8]]
    assert ac.loo_centroid(vectors, ["a", "a", "b", "b", "b"])[:4] == ["a", "a", "b", "b"]
    # A lone member of its kind has no centroid of its own kind to go to.
    assert ac.loo_centroid([[1, 0], [0, 1], [0.1, 1]], ["a", "b", "b"])[0] == "b"


def test_feature_similarity_ranks_the_same_kind_first_then_the_nearest_difficulty() -> None:
    nb = ac.Neighbours(ac.feature_similarity(["code", "math", "code", "code"], [0.1, 0.1, 0.9, 0.3]))
    assert nb.of(0, 3) == [3, 2, 1]


# --- replay, oracle, policies -------------------------------------------------------------------


def test_replay_takes_the_picked_models_outcome_and_adds_the_routers_cost() -> None:
    rows = [row(True, 1.0, True, 3.0), row(False, 2.0, True, 6.0)]
    assert ac.replay(rows, ["small", "large"]) == {"correct": 2, "n": 2, "accuracy": 1.0, "mean_s": 3.5, "to_large": 0.5}
    assert ac.replay(rows, ["small", "small"], 0.5) == {"correct": 1, "n": 2, "accuracy": 0.5, "mean_s": 2.0, "to_large": 0.0}
    assert ac.replay(rows, ["large", "large"], [1.0, 0.0])["mean_s"] == 5.0
    with pytest.raises(ValueError):
        ac.replay(rows, ["small"])
    large = ac.replay(rows, ["large", "large"])
    scored = ac.against_large(ac.replay(rows, ["small", "large"]), large)
    assert scored["accuracy_kept"] == 1.0 and scored["time_share"] == round(3.5 / 4.5, 3) and not scored["goal"]


def test_target_is_95_percent_of_always_large_rounded_up() -> None:
    rows = [row(False, 1, True, 2)] * 68 + [row(False, 1, False, 2)] * 12
    assert ac.target_correct(rows) == 65  # 0.95 * 68 = 64.6
    assert ac.target_correct([row(False, 1, True, 2)] * 20) == 19  # exactly 19.0 stays 19


def test_the_oracle_takes_the_faster_model_then_the_cheapest_flips() -> None:
    rows = [
        row(True, 1.0, True, 5.0),  # small: right and faster
        row(True, 3.0, True, 2.0),  # large: right and faster
        row(False, 1.0, True, 2.0),  # a flip to large costs 1 s
        row(False, 1.0, True, 9.0),  # costs 8 s
        row(False, 1.0, False, 9.0),  # nothing to gain
    ]
    # The faster picks get 2 right. Always-large gets 4; 95% needs 4 (3.8 rounded up): both flips.
    assert ac.oracle(rows) == ["small", "large", "large", "large", "small"]
    assert ac.oracle(rows, keep=0.75) == ["small", "large", "large", "small", "small"]  # needs 3: the cheap flip
    assert ac.oracle(rows, keep=0.5) == ["small", "large", "small", "small", "small"]  # needs 2: none


@pytest.mark.parametrize("seed", range(6))
def test_the_oracle_is_the_brute_force_optimum(seed: int) -> None:
    rows = random_rows(random.Random(seed), 9)
    need = ac.target_correct(rows)
    best = min(
        (ac.replay(rows, picks)["mean_s"], picks)
        for picks in itertools.product(ac.SIDES, repeat=len(rows))
        if ac.replay(rows, picks)["correct"] >= need
    )
    got = ac.replay(rows, ac.oracle(rows))
    assert got["correct"] >= need and got["mean_s"] == pytest.approx(best[0], abs=1e-3)


def test_the_group_policy_is_the_cheapest_that_keeps_enough() -> None:
    rows = [
        row(True, 1, True, 5, g="easy"),
        row(True, 1, True, 5, g="easy"),
        row(False, 1, True, 5, g="hard"),
        row(False, 1, True, 5, g="hard"),
        row(True, 1, True, 5, g="mid"),
        row(False, 1, True, 5, g="mid"),
    ]
    groups = [r["g"] for r in rows]
    # 6 right by always-large; 95% needs 6: only the easy group may go to the small model.
    assert ac.best_group_policy(rows, groups) == {"easy": "small", "hard": "large", "mid": "large"}
    # Needing 4 (keep 2/3): mid may go small too.
    assert ac.best_group_policy(rows, groups, keep=4 / 6) == {"easy": "small", "hard": "large", "mid": "small"}


@pytest.mark.parametrize("seed", range(4))
def test_the_group_policy_search_matches_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    rows = random_rows(rng, 30)
    groups = [rng.choice("abcde") for _ in rows]
    names = sorted(set(groups))
    need = ac.target_correct(rows)
    scored = []
    for sides in itertools.product(ac.SIDES, repeat=len(names)):
        policy = dict(zip(names, sides))
        r = ac.replay(rows, [policy[g] for g in groups])
        if r["correct"] >= need:
            scored.append(r["mean_s"])
    got = ac.replay(rows, [ac.best_group_policy(rows, groups)[g] for g in groups])
    assert got["correct"] >= need and got["mean_s"] == pytest.approx(min(scored), abs=1e-3)


def test_select_takes_the_cheapest_that_keeps_enough_else_the_most_correct() -> None:
    results = [{"correct": 10, "mean_s": 9.0}, {"correct": 8, "mean_s": 2.0}, {"correct": 9, "mean_s": 5.0}]
    assert ac.select(results, 9) == 2
    assert ac.select(results, 11) == 0
    assert ac.select(results, 1) == 1


# --- learned routers ----------------------------------------------------------------------------


def test_knn_small_router_leaves_the_task_out_of_its_own_vote() -> None:
    # Pairs of identical prompts: in each, the small model is right on exactly one. With k=1 each
    # task's vote is its twin's outcome, so the router picks the opposite of the task's own label.
    vectors = [[1, 0], [1, 0], [0, 1], [0, 1]]
    rows = [row(True, 1, True, 2), row(False, 1, True, 2), row(False, 1, True, 2), row(True, 1, True, 2)]
    nb = ac.Neighbours(ac.cosine(vectors))
    config = {"label": "small_ok", "k": 1, "threshold": 1.0}
    assert ac.knn_small_loo(rows, nb, config) == ["large", "small", "small", "large"]
    # Leaving task 1 out: task 0's nearest is then from the other pair.
    assert ac.knn_small_loo(rows, nb, config, frozenset({1})) == ["large", "small", "large"]
    assert ac.small_labels([row(False, 1, False, 2)], "small_enough") == [True]
    assert ac.small_labels([row(False, 1, False, 2)], "small_ok") == [False]


def test_nested_selection_never_sees_the_held_out_task() -> None:
    rows = [row(True, 1, True, 2) for _ in range(5)]
    seen: list[tuple[str, frozenset[int]]] = []

    def picks_for(config: dict, out: frozenset[int]) -> list[str]:
        seen.append((config["name"], out))
        return [config["side"]] * (len(rows) - len(out))

    configs = [{"name": "big", "side": "large"}, {"name": "fast", "side": "small"}]
    picks, chosen = ac.nested(rows, configs, picks_for, lambda config, i: config["side"])
    assert picks == ["small"] * 5 and all(c["name"] == "fast" for c in chosen)
    assert sorted(seen) == sorted((c["name"], frozenset({i})) for c in configs for i in range(5))


def test_knn_group_router_applies_the_policy_learned_without_the_task() -> None:
    # Two groups; the easy one is right on the small model, the hard one only on the large.
    vectors = [[1, 0.0], [1, 0.1], [1, -0.1], [0.0, 1], [0.1, 1], [-0.1, 1]]
    rows = [row(True, 1, True, 5)] * 3 + [row(False, 1, True, 5)] * 3
    groups = [("m", "easy")] * 3 + [("m", "hard")] * 3
    nb = ac.Neighbours(ac.cosine(vectors))
    policies: dict = {}
    picks = [ac.knn_group_pick(rows, nb, groups, i, 1, frozenset(), policies) for i in range(6)]
    assert picks == ["small"] * 3 + ["large"] * 3
    assert set(policies) == {(i,) for i in range(6)}  # one policy per held-out task, each without it


# --- the committed run --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def committed() -> tuple[list[dict], list[dict], dict]:
    data = json.loads(ac.RESULTS.read_text(encoding="utf-8"))
    rows, tasks = ac.aligned(data["runs"][0]["rows"], ac.load_tasks())
    return rows, tasks, data


def test_the_committed_run_replays_to_its_figures(committed) -> None:
    rows, tasks, data = committed
    routers = {r["router"]: r for r in ac.fixed_routers(rows, tasks)}
    large = routers["always-large"]
    assert (large["correct"], large["n"], large["time_share"], large["accuracy_kept"]) == (68, 80, 1.0, 1.0)
    assert routers["always-small"]["correct"] == 47
    live = routers["features (live)"]
    recorded = data["runs"][0]["auto"]
    assert live["accuracy"] == recorded["accuracy"] and live["mean_s"] == pytest.approx(recorded["mean_s"], abs=0.002)
    assert routers["features (choose offline)"]["correct"] == live["correct"]  # the same picks, on estimated speeds
    oracle = routers["oracle floor"]
    assert oracle["correct"] >= 65 and oracle["goal"]
    for r in routers.values():  # nothing keeping 95% beats the oracle; the tag policy bounds the kind-only ones
        if r["correct"] >= 65:
            assert oracle["mean_s"] <= r["mean_s"]
    bound = routers["best kind x difficulty policy (tags)"]
    assert bound["correct"] >= 65 and bound["mean_s"] <= routers["best kind policy (classify's kind)"]["mean_s"] <= live["mean_s"]


def test_evaluate_without_the_embedder_scores_the_features_alone(committed) -> None:
    rows, tasks, _ = committed
    result = ac.evaluate(rows[:24], tasks[:24])  # a slice keeps it fast; the learners are the same
    names = [r["router"] for r in result["routers"]]
    assert "features kNN small-is-right" in names and not any("embedding" in n for n in names)
    assert result["kind_accuracy"]["features (task_kind.classify)"]["n"] == 24
    assert all(len(t) >= 1 and sum(c["folds"] for c in t) == 24 for t in result["nested_choices"].values())


def test_a_missing_embedder_is_one_sentence_and_exit_2(capsys, tmp_path) -> None:
    assert ac.main(["--model", str(tmp_path / "none.gguf")]) == 2
    err = capsys.readouterr().err
    assert "run `cove setup`" in err and err.count("\n") == 1


def test_cosine_is_scale_free() -> None:
    sim = ac.cosine(np.array([[3.0, 0.0], [0.0, 0.5], [2.0, 2.0]]))
    assert sim[0, 0] == pytest.approx(1.0) and sim[0, 1] == pytest.approx(0.0) and sim[0, 2] == pytest.approx(2**-0.5)
