"""In the scheduler: the plugin that answers the claims coming on the workers' streams (see
:mod:`.claim`, which makes it, there only, where ``distributed`` is)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

__all__ = ["ClaimAnswers"]


class ClaimAnswers(SchedulerPlugin):
    """Answers each claim that comes as an event of ``topic`` (from a worker's stream,
    which names the worker) with ``answer(key, start)`` in a message of operation
    ``answer_op``, sent on the scheduler's stream to that worker by ``send``."""

    def __init__(
        self,
        scheduler: Any,
        topic: str,
        answer_op: str,
        answer: Callable[[str, float, Any], float | None],
        send: Callable[[Any, dict[str, Any]], None],
    ) -> None:
        self.scheduler = scheduler
        self.topic = topic
        self.answer_op = answer_op
        self.answer = answer
        self.send = send

    def log_event(self, topic: str, msg: Any) -> None:
        if topic != self.topic or not isinstance(msg, dict):
            return
        key, start, worker = msg.get("key"), msg.get("start"), msg.get("worker")
        if not isinstance(key, str) or not isinstance(start, float):
            return
        earlier = self.answer(key, start, self.scheduler)
        stream = self.scheduler.stream_comms.get(worker)
        if stream is not None:  # (a worker gone meanwhile: its task is sent again)
            self.send(
                stream, {"op": self.answer_op, "key": key, "start": start, "earlier": earlier}
            )
