"""Which tokens a turn sends to the model: the request's own token ids, or its messages rendered,
fitted to the context (the oldest turns dropped, or, when the request keeps every turn, refused
with the numbers) and joined to the transcript of the turn before.

Host-internal (run by ModelSession); raises ContextOverflow when the prompt cannot fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.context_policy import ContextOverflow, reply_reserve
from app.engine.host.prompt_counts import FittedPrompt, LongestToken, TokenCounts, fit_prompt, min_prompt_tokens
from app.engine.host.templates import ChatFormat, Rendered
from app.engine.host.transcript import Transcript, plan_prompt
from app.engine.passage_fit import fit_passages
from app.engine.protocol import Generate


@dataclass(frozen=True)
class PromptPlan:
    tokens: list[int]  # what the model is given
    text: str | None  # the rendered prompt they stand for (None: raw token ids)
    rendered: Rendered | None
    dropped_turns: int
    reserve: int  # tokens kept free for the reply
    passages_kept: int | None = None  # of the newest message's document passages, how many fit (None: it had none)


@dataclass(frozen=True)
class Tokenizer:
    """The model's side of planning a prompt (ModelSession's methods and memos)."""

    chat_format: ChatFormat
    tokenize_prompt: Callable[[str], list[int]]  # with the BOS rule
    tokenize_rest: Callable[[str], list[int]]  # a continuation: no BOS
    counts: TokenCounts
    longest_token: LongestToken
    n_vocab: int


def whole_prompt(messages: list[dict[str, Any]], tok: Tokenizer, n_ctx: int, reserve: int) -> FittedPrompt:
    """Every message, rendered and tokenized, or ContextOverflow with the numbers.

    A text too large to fit by a lower bound alone (a huge paste) is refused without rendering
    or tokenizing it ("at least N tokens")."""
    budget = n_ctx - reserve
    if sum(len(m["content"]) for m in messages if isinstance(m.get("content"), str)) > budget:
        longest = tok.longest_token()
        if longest is not None:
            at_least = min_prompt_tokens(messages, longest)
            if at_least > budget:
                raise ContextOverflow(at_least, n_ctx, reserve, at_least=True)
    rendered = tok.chat_format.render(messages)
    tokens = tok.tokenize_prompt(rendered.text)
    if len(tokens) > budget:
        raise ContextOverflow(len(tokens), n_ctx, reserve)
    return FittedPrompt(rendered, tokens, 0)


def plan_turn(req: Generate, tok: Tokenizer, n_ctx: int, transcript: Transcript | None) -> PromptPlan:
    """The prompt for `req`. Raises ContextOverflow, or ValueError for bad token ids."""
    if req.prompt_tokens is not None:
        tokens = [int(t) for t in req.prompt_tokens]
        if not tokens or min(tokens) < 0 or max(tokens) >= tok.n_vocab:
            raise ValueError("the prompt token ids are empty or outside the vocabulary")
        if len(tokens) >= n_ctx:
            raise ContextOverflow(len(tokens), n_ctx, 1)
        return PromptPlan(tokens, None, None, 0, 1)
    reserve = reply_reserve(req.max_tokens, n_ctx)
    if req.raw_prompt is not None:
        tokens = tok.tokenize_prompt(req.raw_prompt)
        if len(tokens) + reserve > n_ctx:
            raise ContextOverflow(len(tokens), n_ctx, reserve)
        return PromptPlan(tokens, None, None, 0, reserve)
    if req.keep_all_turns:
        fitted, kept = fit_passages(req.messages, lambda messages: whole_prompt(messages, tok, n_ctx, reserve))
    else:
        fitted, kept = fit_passages(
            req.messages,
            lambda messages: fit_prompt(messages, tok.chat_format, tok.tokenize_prompt, tok.counts, tok.longest_token, n_ctx, reserve),
        )
    rendered, full = fitted.rendered, fitted.tokens
    tokens, _ = plan_prompt(transcript, req.conversation_id, rendered.text, full, tok.tokenize_rest)
    if len(tokens) > len(full) and len(tokens) + reserve > n_ctx:
        tokens = full  # the transcript's tokenization is longer and would not leave room
    return PromptPlan(tokens, rendered.text, rendered, fitted.dropped_turns, reserve, kept)
