"""The flat, single-selection table the Models panel's views share (catalog, search, files, installed,
connections): its set-up, its rows, and choosing a row the way a click does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTreeWidget, QTreeWidgetItem

TreeT = TypeVar("TreeT", bound=QTreeWidget)


def setup_list_tree(tree: TreeT, name: str, columns: Sequence[str], stretch: int = 0) -> TreeT:
    """Columns with headers, no tree decoration, one row selectable; column `stretch` takes the spare width."""
    tree.setAccessibleName(name)
    tree.setColumnCount(len(columns))
    tree.setHeaderLabels(list(columns))
    tree.setRootIsDecorated(False)
    tree.setUniformRowHeights(True)
    tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    tree.header().setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    tree.header().setStretchLastSection(False)
    return tree


def top_items(tree: QTreeWidget) -> list[QTreeWidgetItem]:
    """The table's rows (its top-level items), in the order shown."""
    return [item for row in range(tree.topLevelItemCount()) if (item := tree.topLevelItem(row)) is not None]


def choose_row(tree: QTreeWidget, row: int, on_item: Callable[[QTreeWidgetItem], None]) -> None:
    """Pick `row` as a click would: selecting it, or acting on it again if it already is (no such row: nothing)."""
    item = tree.topLevelItem(row)
    if item is None:
        return
    if tree.currentItem() is item:
        on_item(item)
    else:
        tree.setCurrentItem(item)
