"""The checks of a funnel's graph as a graph (FN-21 to FN-23): one entry, edges that point at
nodes, every node reachable from the entry, no loop without a wait; and a context path read by a
node names a value some node before it produces.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping

from app.engines.funnels.definitions.graph import AiGenerate, Definition, Node, Wait, edges, kind_of
from app.engines.funnels.definitions.problems import Problem
from app.engines.funnels.runs.work.context import CONTEXT_ROOTS, path_problem, split_path


def entry_problems(definition: Definition) -> list[Problem]:
    entries = [n.id for n in definition.nodes if n.entry]
    if not definition.nodes:
        return [Problem("FN-21", "entry", "the graph has no nodes")]
    if not entries:
        return [Problem("FN-21", "entry", "no node is marked as the entry")]
    if len(entries) > 1:
        return [
            Problem("FN-21", "entry", f"more than one entry ({', '.join(entries)})", node_id)
            for node_id in entries
        ]
    return []


def edge_problems(nodes: Mapping[str, Node]) -> list[Problem]:
    out = []
    for node in nodes.values():
        for name, target in edges(node):
            if target not in nodes:
                out.append(
                    Problem(
                        "FN-26",
                        "edge",
                        f"edge '{name}' points at '{target}', which does not exist",
                        node.id,
                    )
                )
    return out


def _successors(nodes: Mapping[str, Node], node: Node) -> list[str]:
    return [t for _, t in edges(node) if t in nodes]


def unreachable(nodes: Mapping[str, Node], entry: str) -> list[Problem]:
    seen = {entry}
    queue = deque([entry])
    while queue:
        for target in _successors(nodes, nodes[queue.popleft()]):
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return [
        Problem("FN-22", "unreachable", "not reachable from the entry", node_id)
        for node_id in nodes
        if node_id not in seen
    ]


def cycles_without_wait(nodes: Mapping[str, Node]) -> list[Problem]:
    """A cycle without a wait exists exactly when the graph minus its wait nodes has a cycle;
    those are the strongly connected components (or self-loops) of that subgraph."""
    sub = {k: v for k, v in nodes.items() if not isinstance(v, Wait)}
    out = []
    for component in _strongly_connected(sub):
        looped = len(component) > 1 or component[0] in _successors(sub, sub[component[0]])
        if looped:
            names = ", ".join(sorted(component))
            for node_id in sorted(component):
                out.append(
                    Problem(
                        "FN-23",
                        "cycle_without_wait",
                        f"this node is on a loop without a wait ({names})",
                        node_id,
                    )
                )
    return out


def _strongly_connected(nodes: Mapping[str, Node]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (graphs drawn by people or programs can be deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    result: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(_successors(nodes, nodes[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node_id, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(_successors(nodes, nodes[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node_id] = min(low[node_id], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node_id])
            if low[node_id] == index[node_id]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node_id:
                        break
                result.append(component)
    return result


def _descendants(nodes: Mapping[str, Node], start: str) -> set[str]:
    """Every node a run can reach after leaving ``start``."""
    seen: set[str] = set()
    queue = deque(_successors(nodes, nodes[start]))
    while queue:
        node_id = queue.popleft()
        if node_id not in seen:
            seen.add(node_id)
            queue.extend(_successors(nodes, nodes[node_id]))
    return seen


def context_problems(path: str, node_id: str, nodes: Mapping[str, Node]) -> list[str]:
    """A context path names a value some node of this graph produces before ``node_id`` reads it
    (``http.<http_request id>…``, ``payments.<create_payment id>…``, ``bookings.<book_slot
    id>…``, ``vars.<ai_generate variable>``)."""
    shape = path_problem(path)
    if shape is not None:
        return [shape]
    root, name = split_path(path)[:2]
    kind = CONTEXT_ROOTS[root]
    if root == "vars":
        producers = [
            n.id for n in nodes.values() if isinstance(n, AiGenerate) and n.variable == name
        ]
        missing = f"'{path}': no ai_generate node fills the variable '{name}'"
    else:
        producers = [name] if name in nodes and kind_of(nodes[name]) == kind else []
        missing = f"'{path}': '{name}' is not a {kind} node of this graph"
    if not producers:
        return [missing]
    if not any(node_id in _descendants(nodes, p) for p in producers):
        return [f"'{path}': {kind} '{producers[0]}' does not run before this node"]
    return []
