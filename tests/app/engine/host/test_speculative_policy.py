"""Drafting without the engine: prompt lookup's drafts, the policy's draft lengths, its pauses when
drafting does not pay and its return, and the batch costs carried between replies."""

from __future__ import annotations

import numpy as np

from app.engine.host.speculative import MAX_DRAFT, MIN_DRAFT_STEPS, BatchCosts, DraftPolicy, PromptLookup


def ids(*tokens: int) -> np.ndarray:
    return np.array(tokens, dtype=np.intc)


def test_prompt_lookup_drafts_what_followed_the_most_recent_earlier_occurrence() -> None:
    lookup = PromptLookup(max_ngram=3, min_ngram=2)
    #           0  1  2  3  4  5  6  7  8  9
    history = ids(5, 6, 7, 1, 2, 5, 6, 8, 9, 5)
    # The last two tokens are (5, 6): seen at 0 (then 7, 1) and at 5 (then 8, 9): the later wins.
    assert lookup.draft(history, 6, 2) == [8, 9]
    # k limits the draft, and a continuation running into the end is cut there.
    assert lookup.draft(history, 6, 1) == [8]
    assert lookup.draft(history, 6, 10) == [8, 9, 5, 6]


def test_prompt_lookup_prefers_the_longest_match_and_needs_min_ngram() -> None:
    lookup = PromptLookup(max_ngram=3, min_ngram=2)
    history = ids(1, 2, 3, 40, 9, 2, 3, 50, 1, 2)
    # (1, 2, 3) occurs at 0 (then 40); (2, 3) also at 5 (then 50): the 3-gram decides.
    assert lookup.draft(history, 3, 1) == [40]
    # A token seen before but no 2-gram match: nothing drafted.
    assert lookup.draft(ids(7, 8, 9), 8, 3) == []
    # The final position itself is never its own match.
    assert lookup.draft(ids(4, 4), 4, 2) == [4]  # (4, 4) at 0..1: followed by the last 4
    assert lookup.draft(ids(), 4, 2) == []


def measured(costs: BatchCosts, step_ms: float = 20.0) -> BatchCosts:
    for _ in range(5):
        costs.plain(step_ms / 1000)
    return costs


def test_a_high_acceptance_drafts_long_and_a_low_one_pauses() -> None:
    policy = DraftPolicy("lookup", measured(BatchCosts()))
    first = policy.draft_length()
    assert 1 <= first < MAX_DRAFT  # the prior (2 of 3) tries a short draft
    for _ in range(6):
        policy.verified(first, first, first, first + 1, 0.030)  # every draft kept, cheap batches
    assert policy.draft_length() > first
    assert policy.drafting and policy.stopped is None

    rejecting = DraftPolicy("lookup", measured(BatchCosts()))
    for _ in range(3):
        k = rejecting.draft_length()
        if k == 0:
            break
        rejecting.verified(k, k, 0, 1, 0.030)
    assert rejecting.draft_length() == 0
    assert not rejecting.drafting
    assert rejecting.stopped in ("too few drafts accepted", "not paying")
    assert rejecting.metrics()["pauses"] == 1


def test_slow_verification_is_not_paying_even_when_drafts_are_kept() -> None:
    policy = DraftPolicy("model", measured(BatchCosts(), step_ms=10.0))
    for _ in range(MIN_DRAFT_STEPS - 1):
        policy.verified(2, 2, 2, 3, 0.100)  # 3 tokens in 100 ms: slower than 1 in 10 ms
        assert policy.drafting  # not judged on fewer steps
    policy.verified(2, 2, 2, 3, 0.100)
    assert not policy.drafting
    assert policy.stopped == "not paying"
    n = MIN_DRAFT_STEPS
    assert policy.metrics() == {"mode": "model", "drafted": 2 * n, "accepted": 2 * n, "steps": n, "stopped": "not paying", "pauses": 1}


def test_a_paused_policy_tries_again_after_plain_steps_and_waits_longer_each_time() -> None:
    costs = measured(BatchCosts())
    policy = DraftPolicy("lookup", costs)

    def rejected_until_paused() -> None:
        while (k := policy.draft_length()) > 0:
            policy.verified(k, k, 0, 1, 0.030)

    rejected_until_paused()
    assert not policy.drafting and policy.pauses == 1
    for _ in range(DraftPolicy.PAUSE_STEPS - 1):
        policy.plain_step(0.020)
        assert policy.draft_length() == 0
    policy.plain_step(0.020)
    assert policy.draft_length() > 0  # tried again, with the prior
    rejected_until_paused()
    assert policy.pauses == 2
    for _ in range(DraftPolicy.PAUSE_STEPS):
        policy.plain_step(0.020)
    assert policy.draft_length() == 0  # the second pause is twice as long


def test_batch_costs_are_measured_per_size_and_drift_back_to_the_prior_between_replies() -> None:
    costs = measured(BatchCosts(), step_ms=20.0)
    assert costs.relative(5) == costs.prior(5)
    for _ in range(20):
        costs.batch(5, 0.100)  # five tokens cost five steps here
    assert abs(costs.relative(5) - 5.0) < 0.1
    assert costs.relative(4) == costs.prior(4)  # other sizes are not guessed from it
    costs.new_reply()
    assert abs(costs.relative(5) - (5.0 + costs.prior(5)) / 2) < 0.1
    # A batch measured before any plain step has nothing to be relative to.
    fresh = BatchCosts()
    fresh.batch(3, 1.0)
    assert fresh.relative(3) == fresh.prior(3)


def test_prompt_lookup_says_whether_its_match_is_a_phrase_or_a_quote() -> None:
    lookup = PromptLookup()
    quote = list(range(100, 120))
    history = ids(*quote, 7, 8, *quote[:11])
    assert lookup.draft(history, quote[11], 3) == quote[12:15]
    assert lookup.kind == "long"  # the last 12 tokens match the earlier place
    assert lookup.draft(ids(1, 2, 3, 4, 9, 9, 2, 3), 4, 2) == [9, 9]
    assert lookup.kind == "short"  # only (2, 3, 4) matches


def test_short_lookup_matches_are_not_drafted_where_batches_cost_much() -> None:
    costs = measured(BatchCosts())
    for b in range(2, MAX_DRAFT + 2):
        for _ in range(20):
            costs.batch(b, 0.020 * (1.0 + 0.5 * (b - 1)))  # half a step per extra token
    policy = DraftPolicy("lookup", costs)
    assert policy.draft_length("short") == 0
    assert policy.drafting  # nothing measured yet: no pause on the prior alone
    assert policy.draft_length("long") > 0
