"""Partition limits as Slurm reports them, and the choice of a partition for a request.

The clusters this targets often run with ``EnforcePartLimits=NO``: sbatch then
accepts a job that exceeds a partition's limits and it pends forever
(``PartitionTimeLimit``).  Choosing a fitting partition up front avoids that.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from .resource_spec import ResourceError, ResourceSpec, format_slurm_time, parse_slurm_time

__all__ = [
    "NodeInfo",
    "PartitionInfo",
    "choose_partition",
    "parse_gpus",
    "parse_scontrol_partitions",
    "parse_sinfo_nodes",
    "rejection_reasons",
]

_MB = 1024**2
_KEY_RE = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/]*)=")
_UNLIMITED = frozenset({"UNLIMITED", "INFINITE", "NONE", "N/A", "(NULL)", ""})


@dataclass(frozen=True)
class NodeInfo:
    """One node of a partition, from ``sinfo -N``; memory in bytes."""

    name: str
    cpus: int
    memory: int
    gpus: int
    state: str


@dataclass(frozen=True)
class PartitionInfo:
    """A partition's limits; ``None`` means unlimited.  Memory in bytes."""

    name: str
    state: str
    default: bool
    max_time: timedelta | None
    max_nodes: int | None
    max_cpus_per_node: int | None
    max_mem_per_node: int | None
    total_cpus: int
    total_nodes: int
    nodes: tuple[NodeInfo, ...] = ()


def _fields(line: str) -> dict[str, str]:
    """Split ``Key=value Key2=a b=c`` at the keys: values may hold ``=`` (TRES=cpu=16,...)."""
    matches = list(_KEY_RE.finditer(line))
    result: dict[str, str] = {}
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        result[match.group(1)] = line[match.end() : end].strip()
    return result


def _limit(value: str | None) -> int | None:
    if value is None or value.strip().upper() in _UNLIMITED:
        return None
    return int(value)


def parse_scontrol_partitions(text: str) -> list[PartitionInfo]:
    """Parse ``scontrol show partition -o`` (one partition per line), in Slurm's order."""
    partitions: list[PartitionInfo] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        f = _fields(line)
        if "PartitionName" not in f:
            continue
        max_mem = _limit(f.get("MaxMemPerNode"))
        partitions.append(
            PartitionInfo(
                name=f["PartitionName"],
                state=f.get("State", "UNKNOWN").upper(),
                default=f.get("Default", "NO").upper() == "YES",
                max_time=parse_slurm_time(f.get("MaxTime", "UNLIMITED")),
                max_nodes=_limit(f.get("MaxNodes")),
                max_cpus_per_node=_limit(f.get("MaxCPUsPerNode")),
                max_mem_per_node=None if max_mem is None else max_mem * _MB,
                total_cpus=int(f.get("TotalCPUs", "0")),
                total_nodes=int(f.get("TotalNodes", "0")),
            )
        )
    return partitions


def parse_gpus(gres: str) -> int:
    """GPUs in a gres string: ``"gpu:2"``, ``"gpu:a100:4(S:0-1),shard:8"``, ``"(null)"``."""
    total = 0
    for item in gres.split(","):
        item = item.split("(", 1)[0]
        parts = item.split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


SINFO_FORMAT = "%R|%N|%c|%m|%G|%T"


def parse_sinfo_nodes(text: str) -> dict[str, list[NodeInfo]]:
    """Parse ``sinfo -h -N -o SINFO_FORMAT``: partition name -> its nodes."""
    result: dict[str, list[NodeInfo]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        partition, node, cpus, memory, gres, state = line.split("|", 5)
        result.setdefault(partition, []).append(
            NodeInfo(
                name=node,
                cpus=int(cpus.rstrip("+")),
                memory=int(memory.rstrip("+")) * _MB,
                gpus=parse_gpus(gres),
                state=state,
            )
        )
    return result


def _node_capacity(partition: PartitionInfo, node: NodeInfo, resources: ResourceSpec) -> int:
    """Processes of ``resources`` one node can hold (0 if it lacks memory or GPUs)."""
    cpus = node.cpus
    if partition.max_cpus_per_node is not None:
        cpus = min(cpus, partition.max_cpus_per_node)
    if resources.memory is not None and node.memory and resources.memory > node.memory:
        return 0
    slots = cpus // resources.cpu_cores_per_process
    if resources.gpus_per_process:
        slots = min(slots, node.gpus // resources.gpus_per_process)
    if resources.processes_per_node is not None:
        return resources.processes_per_node if slots >= resources.processes_per_node else 0
    return slots


def rejection_reasons(partition: PartitionInfo, resources: ResourceSpec) -> list[str]:
    """Why ``resources`` cannot run in ``partition`` (empty when it fits)."""
    reasons: list[str] = []
    if partition.state != "UP":
        reasons.append(f"state is {partition.state}")
    walltime = resources.walltime
    if walltime is not None and partition.max_time is not None and walltime > partition.max_time:
        reasons.append(
            f"walltime {format_slurm_time(walltime)} exceeds MaxTime "
            f"{format_slurm_time(partition.max_time)}"
        )
    per_node = resources.cores_per_node
    if partition.max_cpus_per_node is not None and per_node > partition.max_cpus_per_node:
        reasons.append(
            f"needs {per_node} cores on a node, MaxCPUsPerNode is {partition.max_cpus_per_node}"
        )
    memory = resources.memory
    max_mem = partition.max_mem_per_node
    if memory is not None and max_mem is not None and memory > max_mem:
        reasons.append(f"needs {memory // _MB} MiB per node, MaxMemPerNode is {max_mem // _MB} MiB")
    if reasons:
        return reasons

    if partition.nodes:
        # Fill the largest nodes first: the fewest nodes a request can use.
        capacities = sorted(
            (_node_capacity(partition, node, resources) for node in partition.nodes),
            reverse=True,
        )
        used = [c for c in itertools.accumulate(capacities) if c < resources.process_count]
        needed_nodes = len(used) + 1
        placed = sum(capacities)
        if placed < resources.process_count:
            each = f"{resources.cpu_cores_per_process} core(s)"
            if memory is not None:
                each += f", {memory // _MB} MiB per node"
            if resources.gpus_per_process:
                each += f", {resources.gpus_per_process} GPU(s)"
            reasons.append(
                f"its {len(partition.nodes)} node(s) hold only {placed} of "
                f"{resources.process_count} process(es) needing {each}"
            )
    else:
        # Without per-node data, compare totals only.
        needed_nodes = resources.node_count or 1
        if resources.total_cores > partition.total_cpus:
            reasons.append(
                f"needs {resources.total_cores} cores, partition has {partition.total_cpus}"
            )
        if needed_nodes > partition.total_nodes:
            reasons.append(f"needs {needed_nodes} nodes, partition has {partition.total_nodes}")
    if not reasons and partition.max_nodes is not None and needed_nodes > partition.max_nodes:
        reasons.append(f"needs {needed_nodes} nodes, MaxNodes is {partition.max_nodes}")
    return reasons


def choose_partition(partitions: Sequence[PartitionInfo], resources: ResourceSpec) -> str:
    """The first UP partition whose limits fit ``resources``.

    The default partition is tried first, then the others in the order Slurm
    lists them.  Raises :class:`ResourceError` giving every partition's reasons.
    """
    resources.validate()
    if not partitions:
        raise ResourceError("the cluster reports no partitions")
    ordered = sorted(partitions, key=lambda p: not p.default)  # stable: keeps Slurm's order
    rejected: list[str] = []
    for partition in ordered:
        reasons = rejection_reasons(partition, resources)
        if not reasons:
            return partition.name
        rejected.append(f"{partition.name}: " + ", ".join(reasons))
    nodes = "" if resources.node_count is None else f" on {resources.node_count} node(s)"
    walltime = "" if resources.walltime is None else f", {format_slurm_time(resources.walltime)}"
    summary = f"{resources.process_count} process(es){nodes}{walltime}"
    raise ResourceError(f"no partition fits {summary}: " + "; ".join(rejected))
