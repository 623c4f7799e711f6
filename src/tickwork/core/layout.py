"""A layered (Sugiyama) drawing of a DAG: where each task goes, and the path of each edge.

Pure: names and edges in, coordinates out. Steps: layers by longest path from the sources;
dummy nodes so that every edge spans one layer; crossings cut by alternating barycenter
sweeps, keeping the best order of a few passes; positions pulled toward the mean of their
neighbours with a minimum gap. Layers run left to right, as a workflow reads.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Sweeps of the crossing reduction (down and up count as two); the best order wins.
ORDER_PASSES = 8
POSITION_PASSES = 4


@dataclass(frozen=True, slots=True)
class Spacing:
    """Distances of the drawing, in its own units (SVG pixels)."""

    layer: float = 200.0  # from one layer's left edge to the next's
    row: float = 44.0  # between neighbours in a layer, centre to centre
    node_width: float = 150.0
    node_height: float = 30.0
    margin: float = 10.0


@dataclass(frozen=True, slots=True)
class Placed:
    name: str
    x: float  # left edge
    y: float  # top edge
    layer: int


@dataclass(frozen=True, slots=True)
class Path:
    """An edge from ``source``'s right side to ``target``'s left side through ``points``."""

    source: str
    target: str
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class Layout:
    nodes: Mapping[str, Placed]
    edges: tuple[Path, ...]
    width: float
    height: float
    crossings: int


def layout(
    names: Sequence[str], upstream: Mapping[str, Sequence[str]], spacing: Spacing = Spacing()
) -> Layout:
    """Lay out the DAG whose nodes are ``names`` (in a stable order) and whose edges go from
    each of ``upstream[name]`` to ``name``. Edges to unknown names are ignored."""
    known = set(names)
    edges = [(u, n) for n in names for u in upstream.get(n, ()) if u in known and u != n]
    rank = _longest_path_layers(names, edges)
    layers, chains = _with_dummies(names, edges, rank)
    crossings = _order(layers, chains)
    ys = _positions(layers, chains, spacing.row)
    return _drawing(layers, chains, ys, spacing, crossings)


def _longest_path_layers(names: Sequence[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    below: dict[str, list[str]] = {n: [] for n in names}
    indegree = dict.fromkeys(names, 0)
    for u, v in edges:
        below[u].append(v)
        indegree[v] += 1
    rank = dict.fromkeys(names, 0)
    ready = [n for n in names if indegree[n] == 0]
    while ready:
        node = ready.pop()
        for child in below[node]:
            rank[child] = max(rank[child], rank[node] + 1)
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    return rank


# A dummy node is named by its edge and layer; real names never contain NUL.
def _dummy(u: str, v: str, layer: int) -> str:
    return f"\0{u}\0{v}\0{layer}"


def _with_dummies(
    names: Sequence[str], edges: list[tuple[str, str]], rank: dict[str, int]
) -> tuple[list[list[str]], dict[tuple[str, str], list[str]]]:
    """Layers (lists of node ids) and, per edge, the chain of ids it passes through."""
    depth = max(rank.values(), default=-1) + 1
    layers: list[list[str]] = [[] for _ in range(depth)]
    for n in names:
        layers[rank[n]].append(n)
    chains: dict[tuple[str, str], list[str]] = {}
    for u, v in edges:
        chain = [u]
        for layer in range(rank[u] + 1, rank[v]):
            dummy = _dummy(u, v, layer)
            layers[layer].append(dummy)
            chain.append(dummy)
        chain.append(v)
        chains[(u, v)] = chain
    return layers, chains


def _links(chains: dict[tuple[str, str], list[str]]) -> list[tuple[str, str]]:
    return [(a, b) for chain in chains.values() for a, b in itertools.pairwise(chain)]


def _order(layers: list[list[str]], chains: dict[tuple[str, str], list[str]]) -> int:
    """Reorder ``layers`` in place to cut crossings; returns the crossings left."""
    links = _links(chains)
    ups: dict[str, list[str]] = {}
    downs: dict[str, list[str]] = {}
    for a, b in links:
        downs.setdefault(a, []).append(b)
        ups.setdefault(b, []).append(a)
    best = [list(layer) for layer in layers]
    best_count = _crossings(layers, downs)
    for sweep in range(ORDER_PASSES):
        if best_count == 0:
            break
        if sweep % 2 == 0:
            for i in range(1, len(layers)):
                _barycenter(layers[i], layers[i - 1], ups)
        else:
            for i in range(len(layers) - 2, -1, -1):
                _barycenter(layers[i], layers[i + 1], downs)
        count = _crossings(layers, downs)
        if count < best_count:
            best, best_count = [list(layer) for layer in layers], count
    layers[:] = best
    return best_count


def _barycenter(layer: list[str], fixed: list[str], neighbours: dict[str, list[str]]) -> None:
    where = {n: i for i, n in enumerate(fixed)}

    def key(item: tuple[int, str]) -> float:
        index, node = item
        near = [where[m] for m in neighbours.get(node, ()) if m in where]
        return sum(near) / len(near) if near else float(index)

    layer[:] = [n for _, n in sorted(enumerate(layer), key=key)]


def _crossings(layers: list[list[str]], downs: dict[str, list[str]]) -> int:
    total = 0
    for upper, lower in itertools.pairwise(layers):
        where = {n: i for i, n in enumerate(lower)}
        ends = [where[b] for a in upper for b in sorted(downs.get(a, ()), key=where.__getitem__)]
        total += _inversions(ends)
    return total


def _inversions(values: list[int]) -> int:
    """Pairs out of order (edges that cross), by merge sort: O(n log n)."""
    if len(values) < 2:
        return 0
    mid = len(values) // 2
    left, right = values[:mid], values[mid:]
    count = _inversions(left) + _inversions(right)
    left.sort()
    right.sort()
    j = 0
    for value in left:
        while j < len(right) and right[j] < value:
            j += 1
        count += j
    return count


def _positions(
    layers: list[list[str]], chains: dict[tuple[str, str], list[str]], gap: float
) -> dict[str, float]:
    """A vertical position per node: pulled to the mean of its neighbours, order kept."""
    ups: dict[str, list[str]] = {}
    downs: dict[str, list[str]] = {}
    for a, b in _links(chains):
        downs.setdefault(a, []).append(b)
        ups.setdefault(b, []).append(a)
    y = {n: i * gap for layer in layers for i, n in enumerate(layer)}
    for sweep in range(POSITION_PASSES):
        order = range(1, len(layers)) if sweep % 2 == 0 else range(len(layers) - 2, -1, -1)
        neighbours = ups if sweep % 2 == 0 else downs
        for i in order:
            wanted = []
            for n in layers[i]:
                near = [y[m] for m in neighbours.get(n, ())]
                wanted.append(sum(near) / len(near) if near else y[n])
            for n, value in zip(layers[i], _spread(wanted, gap), strict=True):
                y[n] = value
    low = min(y.values(), default=0.0)
    return {n: v - low for n, v in y.items()}


def _spread(wanted: list[float], gap: float) -> list[float]:
    """Positions as close to ``wanted`` as order and the minimum gap allow (push down, then
    centre the block on what was wanted)."""
    placed: list[float] = []
    for value in wanted:
        placed.append(max(value, placed[-1] + gap) if placed else value)
    if placed:
        shift = (sum(wanted) - sum(placed)) / len(placed)
        placed = [p + shift for p in placed]
    return placed


def _drawing(
    layers: list[list[str]],
    chains: dict[tuple[str, str], list[str]],
    ys: dict[str, float],
    s: Spacing,
    crossings: int,
) -> Layout:
    nodes: dict[str, Placed] = {}
    centre: dict[str, tuple[float, float]] = {}
    for index, layer in enumerate(layers):
        for n in layer:
            x = s.margin + index * s.layer
            y = s.margin + ys[n]
            centre[n] = (x + s.node_width / 2, y + s.node_height / 2)
            if not n.startswith("\0"):
                nodes[n] = Placed(n, x, y, index)
    paths = []
    for (u, v), chain in chains.items():
        start = (centre[u][0] + s.node_width / 2, centre[u][1])
        end = (centre[v][0] - s.node_width / 2, centre[v][1])
        middle = tuple(centre[d] for d in chain[1:-1])
        paths.append(Path(u, v, (start, *middle, end)))
    width = s.margin * 2 + max(len(layers) - 1, 0) * s.layer + s.node_width
    height = s.margin * 2 + max(ys.values(), default=0.0) + s.node_height
    return Layout(nodes, tuple(paths), width, height, crossings)
