"""The graph of a workflow: the top-level jobs linked to a job by what waits for what.

Nodes are masters (and unsplit jobs), never subjobs: a job waiting for subjob ``12.3`` is
an edge from job 12. The graph holds every job reachable from the one asked about, up
(what it waits for, its ``after``) and down (what waits for it, through the reverse index:
the cost follows the jobs linked, not the repository). Each node carries its status and
its subjobs' counts by status (from the master's counter, no subjob read), from which the
views colour it; ``layers`` places each job one layer below the deepest job it waits for.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ganga_like.model.dependencies import fqid_parts
from ganga_like.model.job import Job
from ganga_like.repository.registry import Registry
from ganga_like.runtime.workflow import index

__all__ = ["Graph", "Node", "workflow_graph"]


@dataclass(frozen=True)
class Node:
    job_id: int
    name: str
    status: str
    # The subjobs' counts by status label, in the order statuses are shown; for an
    # unsplit job, its own status once.
    counts: tuple[tuple[str, int], ...]


@dataclass
class Graph:
    nodes: dict[int, Node] = field(default_factory=dict)
    edges: set[tuple[int, int]] = field(default_factory=set)  # (upstream, downstream)

    def upstream_of(self, job_id: int) -> list[int]:
        return sorted(up for up, down in self.edges if down == job_id)

    def downstream_of(self, job_id: int) -> list[int]:
        return sorted(down for up, down in self.edges if up == job_id)

    def layers(self) -> list[list[int]]:
        """The jobs by depth: each one layer below the deepest job it waits for."""
        depth: dict[int, int] = {}

        def depth_of(job_id: int, seen: frozenset[int] = frozenset()) -> int:
            if job_id not in depth:
                ups = [u for u in self.upstream_of(job_id) if u not in seen]
                below = seen | {job_id}
                depth[job_id] = 1 + max((depth_of(u, below) for u in ups), default=-1)
            return depth[job_id]

        for job_id in self.nodes:
            depth_of(job_id)
        found: list[list[int]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
        for job_id in sorted(self.nodes):
            found[depth[job_id]].append(job_id)
        return found


def _node(job: Job) -> Node:
    if job.is_master:
        ordered = sorted(job.counts().items(), key=lambda kv: kv[0].place)
        counts = tuple((status.label, n) for status, n in ordered if n)
    else:
        counts = ((job.current_status().label, 1),)
    return Node(job.id, job.name, job.current_status().label, counts)


def workflow_graph(registry: Registry, start: Job) -> Graph:
    """The graph of the jobs linked to ``start`` (a subjob stands for its master)."""
    top = start.master or start
    graph = Graph()
    queue = deque([top.id])
    while queue:
        job_id = queue.popleft()
        if job_id in graph.nodes:
            continue
        job = registry.get(job_id)
        if not isinstance(job, Job):
            continue  # removed: what waited for it says so
        graph.nodes[job_id] = _node(job)
        for fqid in job.after:
            upstream, _ = fqid_parts(fqid)
            if isinstance(registry.get(upstream), Job):
                graph.edges.add((upstream, job_id))
                queue.append(upstream)
        for _fqid, dependent in index.dependents_of_tree(registry.root, job_id):
            if isinstance(registry.get(dependent), Job):
                graph.edges.add((job_id, dependent))
                queue.append(dependent)
    return graph
