"""Minimal pytrees: nested tuples (named ones too, as JAX's), lists and dicts of leaves.

Transforms flatten their arguments and results into a list of leaves and a
:class:`TreeDef` that rebuilds the same structure, as JAX does. Dict keys
are visited in sorted order so that the order of leaves never depends on
insertion order.

>>> leaves, treedef = tree_flatten({"b": 2.0, "a": (1.0, [3.0])})
>>> leaves
[1.0, 3.0, 2.0]
>>> tree_unflatten(treedef, [10, 30, 20])
{'a': (10, [30]), 'b': 20}
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["TreeDef", "tree_flatten", "tree_unflatten", "tree_map", "leaf_paths"]


@dataclass(frozen=True)
class TreeDef:
    """The structure of a pytree: ``kind`` is "leaf", "tuple", "namedtuple" (its class the one
    key), "list", "dict" or "none"."""

    kind: str
    children: tuple[TreeDef, ...] = ()
    keys: tuple[Any, ...] = ()

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(child.num_leaves for child in self.children)


_LEAF = TreeDef("leaf")


def _sorted_keys(mapping: dict) -> list:
    try:
        return sorted(mapping)
    except TypeError:  # keys of mixed types: fall back to their repr order
        return sorted(mapping, key=repr)


def tree_flatten(tree: Any) -> tuple[list, TreeDef]:
    """Flatten ``tree`` into ``(leaves, treedef)``."""
    leaves: list = []
    return leaves, _flatten_into(tree, leaves)


# Module functions, not closures that call themselves: a recursive closure is a
# reference cycle (the function holds the cell that holds it), so everything it
# captured -- here the leaves, traced values and through them a whole graph --
# would wait for the cyclic collector, which tracing pauses.
def _flatten_into(node: Any, leaves: list) -> TreeDef:
    if isinstance(node, tuple):
        children = tuple(_flatten_into(child, leaves) for child in node)
        if hasattr(node, "_fields"):  # slogdet's (sign, logabsdet) keeps its names
            return TreeDef("namedtuple", children, (type(node),))
        return TreeDef("tuple", children)
    if isinstance(node, list):
        return TreeDef("list", tuple(_flatten_into(child, leaves) for child in node))
    if isinstance(node, dict):
        keys = tuple(_sorted_keys(node))
        return TreeDef("dict", tuple(_flatten_into(node[k], leaves) for k in keys), keys)
    if node is None:
        return TreeDef("none")
    leaves.append(node)
    return _LEAF


def tree_unflatten(treedef: TreeDef, leaves: list) -> Any:
    """Rebuild the structure ``treedef`` with ``leaves`` in flattening order."""
    return _build(treedef, iter(leaves))


def _build(node: TreeDef, leaves: Iterator) -> Any:
    if node.kind == "leaf":
        return next(leaves)
    if node.kind == "none":
        return None
    children = [_build(child, leaves) for child in node.children]
    if node.kind == "tuple":
        return tuple(children)
    if node.kind == "namedtuple":
        return node.keys[0](*children)
    if node.kind == "list":
        return children
    return dict(zip(node.keys, children))


def tree_map(function: Callable, tree: Any) -> Any:
    """Apply ``function`` to every leaf of ``tree``, keeping its structure.

    >>> tree_map(lambda v: v * 2, {"a": 1, "b": [2, 3]})
    {'a': 2, 'b': [4, 6]}
    """
    leaves, treedef = tree_flatten(tree)
    return tree_unflatten(treedef, [function(leaf) for leaf in leaves])


def leaf_paths(treedef: TreeDef, root: str) -> list[str]:
    """Readable names of the leaves: ``params.w``, ``xs[0]``, in flattening order.

    >>> leaf_paths(tree_flatten({"w": 1, "b": (2, 3)})[1], "params")
    ['params.b[0]', 'params.b[1]', 'params.w']
    """
    paths: list[str] = []
    _collect_paths(treedef, root, paths)
    return paths


def _collect_paths(node: TreeDef, prefix: str, paths: list) -> None:
    if node.kind == "leaf":
        paths.append(prefix)
    elif node.kind == "dict":
        for key, child in zip(node.keys, node.children):
            _collect_paths(child, f"{prefix}.{key}", paths)
    elif node.kind == "namedtuple":
        for name, child in zip(node.keys[0]._fields, node.children):
            _collect_paths(child, f"{prefix}.{name}", paths)
    else:
        for index, child in enumerate(node.children):
            _collect_paths(child, f"{prefix}[{index}]", paths)
