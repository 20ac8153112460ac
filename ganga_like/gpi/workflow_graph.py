"""``j.graph()``: the jobs of a workflow and what waits for what, as text.

A script (or ``print``) gets plain text: each job that waits for nothing of the graph,
then, indented below each job, the jobs that wait for it; a job waiting for two others is
listed under each, in full under the first and as ``(above)`` after. The shell colours
the same rows and a notebook draws the graph as an SVG (``ganga_like.shell.graph_display``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ganga_like.gpi.proxy import current_session
from ganga_like.model.job import Job
from ganga_like.runtime.workflow.graph import Graph, Node, workflow_graph

__all__ = ["Row", "WorkflowGraph", "job_graph", "label", "mix_text", "rows"]


@dataclass(frozen=True)
class Row:
    depth: int
    node: Node
    repeated: bool  # shown in full on an earlier row


def rows(graph: Graph) -> list[Row]:
    """The rows of the text views, in order: a depth-first walk down from each job that
    waits for nothing of the graph (any job, when every one waits: a cycle)."""
    found: list[Row] = []
    shown: set[int] = set()

    def walk(job_id: int, depth: int) -> None:
        node = graph.nodes[job_id]
        found.append(Row(depth, node, job_id in shown))
        if job_id in shown:
            return
        shown.add(job_id)
        for below in graph.downstream_of(job_id):
            walk(below, depth + 1)

    roots = [j for j in sorted(graph.nodes) if not graph.upstream_of(j)]
    for job_id in roots or sorted(graph.nodes)[:1]:
        walk(job_id, 0)
    return found


def mix_text(node: Node) -> str:
    """A job's subjobs by status (``completed:3 failed:1``); empty for an unsplit job."""
    if len(node.counts) == 1 and node.counts[0] == (node.status, 1):
        return ""
    return " ".join(f"{label}:{n}" for label, n in node.counts)


def label(node: Node) -> str:
    """A job as the views name it: its id and name."""
    return f"{node.job_id} {node.name}" if node.name else str(node.job_id)


def _title(graph: Graph, focus: int) -> str:
    jobs, links = len(graph.nodes), len(graph.edges)
    return (
        f"workflow of job {focus}: {jobs} job{'s' * (jobs != 1)}, "
        f"{links} dependenc{'ies' if links != 1 else 'y'}"
    )


class WorkflowGraph:
    """The jobs linked to a job by what waits for what: ``jobs`` (ids), ``edges``
    ((upstream id, downstream id)), and a view of them (text, or an SVG in a notebook)."""

    def __init__(self, graph: Graph, focus: int) -> None:
        self._graph = graph
        self._focus = focus

    @property
    def jobs(self) -> list[int]:
        return sorted(self._graph.nodes)

    @property
    def edges(self) -> list[tuple[int, int]]:
        return sorted(self._graph.edges)

    @property
    def structure(self) -> Graph:
        """The nodes and edges as the views read them."""
        return self._graph

    @property
    def focus(self) -> int:
        """The job it is the graph of."""
        return self._focus

    @property
    def title(self) -> str:
        return _title(self._graph, self._focus)

    def __repr__(self) -> str:
        lines = [self.title]
        for row in rows(self._graph):
            node = row.node
            lead = "    " * (row.depth - 1) + "└─▶ " if row.depth else ""
            if row.repeated:
                lines.append(f"{lead}{label(node)} (above)")
                continue
            mix = mix_text(node)
            lines.append(f"{lead}{label(node)} {node.status}" + (f" ({mix})" if mix else ""))
        return "\n".join(lines)


def job_graph(job: Any) -> WorkflowGraph:
    """``j.graph()``: the jobs linked to ``j`` (a subjob: its master) by what waits for
    what, top-level jobs only (a job waiting for a subjob hangs from its master): printed
    as text, coloured in the shell, drawn as an SVG in a notebook."""
    impl: Job = job._job
    top = impl.master or impl
    return WorkflowGraph(workflow_graph(current_session().registry(), top), top.id)
