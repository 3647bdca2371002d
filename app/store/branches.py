"""Which version of a conversation is shown: messages form a tree (an edit or a regenerated
reply is a sibling sharing a parent), and a conversation shows one path through it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class _Node(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...


def deepest_newest_descendant(messages: Sequence[_Node], start_id: str) -> str:
    """The version below `start_id` the person worked in last: the most recently written
    message in its subtree (always a leaf, since children are written after parents)."""
    children: dict[str | None, list[str]] = {}
    for m in messages:
        children.setdefault(m.parent_id, []).append(m.id)
    order = {m.id: i for i, m in enumerate(messages)}  # oldest first (by seq)
    best, stack, seen = start_id, [start_id], {start_id}
    while stack:
        node_id = stack.pop()
        if order.get(node_id, -1) > order.get(best, -1):
            best = node_id
        for child in children.get(node_id, ()):
            if child not in seen:  # guards a corrupt cycle
                seen.add(child)
                stack.append(child)
    return best


def branch_path(messages: Sequence[_Node], leaf_id: str | None) -> list:
    """Root-to-leaf path ending at `leaf_id` (messages oldest first by seq). Without a known
    leaf: the path to the most recently written message."""
    by_id = {m.id: m for m in messages}
    if leaf_id not in by_id:
        if not messages:
            return []
        leaf_id = messages[-1].id  # the most recently written message
    path: list[_Node] = []
    seen: set[str] = set()
    node = by_id.get(leaf_id)
    while node is not None and node.id not in seen:  # walk up; `seen` guards a corrupt cycle
        path.append(node)
        seen.add(node.id)
        node = by_id.get(node.parent_id) if node.parent_id is not None else None
    path.reverse()
    return path
