"""What the Slurm backend keeps between monitor cycles: the batch base's poller for the
(sub)jobs Slurm runs itself, and one for those run in pilots."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ganga_like.batch.polling import BatchPoller
from ganga_like.model.interfaces import ActiveRef, Poller, Staged
from ganga_like.model.ref_follower import RefFollower

if TYPE_CHECKING:  # the runner plugin is imported only when a pilot is used (pilot_run)
    from ganga_like_runner.journal_reports import Pending

__all__ = ["Key", "PilotPoller", "PilotRefs", "SlurmPoller", "is_pilot_ref"]

Key = tuple[int, str]  # (job id, the pilot's name)


def is_pilot_ref(ref: ActiveRef) -> bool:
    return bool(ref.backend_data.get("pilot"))


class PilotRefs(RefFollower):
    """Of the followed pilot (sub)jobs: besides fqid -> run and the journals to read,
    (job id, pilot) -> their fqids (:attr:`members`) and -> the pilot's Slurm id
    (:attr:`ids`)."""

    def __init__(self) -> None:
        super().__init__(is_pilot_ref)
        self.members: dict[Key, set[str]] = {}
        self.ids: dict[Key, str] = {}

    def clear(self) -> None:
        super().clear()
        self.members = {}
        self.ids = {}

    def added(self, ref: ActiveRef) -> None:
        super().added(ref)
        key = (ref.job_id, str(ref.backend_data["pilot"]))
        self.members.setdefault(key, set()).add(ref.fqid)
        self.ids[key] = str(ref.backend_data.get("id") or "")

    def removed(self, ref: ActiveRef) -> None:
        super().removed(ref)
        key = (ref.job_id, str(ref.backend_data["pilot"]))
        group = self.members.get(key)
        if group is not None:
            group.discard(ref.fqid)
            if not group:
                del self.members[key]
                self.ids.pop(key, None)


class PilotPoller(Poller):
    """What the poll of the pilots' (sub)jobs keeps; staged fields kept once committed."""

    def __init__(self) -> None:
        self.followed = PilotRefs()
        # Per master: how far its journal was read, and the events not yet reported.
        self.offsets: Staged[Mapping[int, int]] = Staged({})
        self.pending: Staged[Pending] = Staged({})
        # When Slurm was last asked about the pilots (monotonic), and since when each
        # pilot neither squeue nor sacct lists has been missing.
        self.polled_at: Staged[float | None] = Staged(None)
        self.missing: Staged[Mapping[str, float]] = Staged({})


class SlurmPoller(BatchPoller):
    """The batch base's poller, and the pilots' in :attr:`pilot`."""

    def __init__(self) -> None:
        super().__init__()
        self.pilot = PilotPoller()
