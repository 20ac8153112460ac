"""The claim of a program's start at the scheduler, before the program starts.

A task sent again after its worker was lost must not run its program a second time: so each
task, before its program starts, has the scheduler note the start (``claim_start``), and
learns from the answer whether an earlier run had started. The note must be at the scheduler
before the program starts, so the task waits for the answer.

A worker's first claim is a call of its own (``run_on_scheduler``), which also teaches the
scheduler the claims that travel on the worker's stream (``ClaimAnswers``, a scheduler
plugin). The worker's later claims go on that stream, batched with its other messages, as
an event of ``CLAIM_TOPIC`` (an operation every scheduler knows), and the answer comes back
on the scheduler's stream to the worker, as an operation the worker was taught before it
sent the claim. A call costs the scheduler several times what a message on a stream does.
A worker that reconnects (to a scheduler started again, say) claims by a call again first;
an answer that does not come in time is asked for by a call.

Only the standard library and ``distributed`` are used here, as in :mod:`.task`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

__all__ = [
    "ANSWER_OP",
    "CLAIM_TIMEOUT",
    "CLAIM_TOPIC",
    "STARTED_ATTRIBUTE",
    "claim",
    "claim_start",
]

# Where the scheduler keeps, per key, when its program started: the poll reads it to tell a
# running subjob from one still queued on a worker, and a task sent again after its worker
# was lost finds it there and does not run its program twice.
STARTED_ATTRIBUTE = "_ganga_like_started"
# The event topic a worker's claims travel under, on its stream to the scheduler.
CLAIM_TOPIC = "ganga_like-claim"
# The operation the scheduler answers a claim with, on its stream to the worker.
ANSWER_OP = "ganga_like-claimed"
# The name of the scheduler plugin that answers the claims of the workers' streams.
PLUGIN_NAME = "ganga_like-claims"
# Longest wait for the scheduler to answer a claim.
CLAIM_TIMEOUT = 30.0
# Where a worker keeps its WorkerClaims.
CLAIMS_ATTRIBUTE = "_ganga_like_claims"


def claim_start(key: str, start: float, dask_scheduler: Any = None) -> float | None:
    """Run in the scheduler: note that the program of ``key`` starts at ``start``; when it
    had started before, that earlier time instead (and nothing is noted). The same claim
    made twice (its answer was late, and it was asked again) is answered as the first."""
    started: dict[str, float] | None = getattr(dask_scheduler, STARTED_ATTRIBUTE, None)
    if started is None:
        started = {}
        setattr(dask_scheduler, STARTED_ATTRIBUTE, started)
    earlier = started.setdefault(key, start)
    return None if earlier == start else earlier


def claim_and_answer_streams(key: str, start: float, dask_scheduler: Any = None) -> float | None:
    """Run in the scheduler: ``claim_start``, with the scheduler taught first to answer
    the claims that come on the workers' streams."""
    if PLUGIN_NAME not in dask_scheduler.plugins:
        from ganga_like_dask.claim_answers import ClaimAnswers

        answers = ClaimAnswers(dask_scheduler, CLAIM_TOPIC, ANSWER_OP, claim_start, send_now)
        dask_scheduler.add_plugin(answers, name=PLUGIN_NAME)
    return claim_start(key, start, dask_scheduler)


class WorkerClaims:
    """Of one worker: the claims sent on its stream and waiting for their answer, and
    the stream the scheduler was taught to answer on."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiting: dict[tuple[str, float], list[Any]] = {}
        self.taught: object = None

    def answered(self, key: str, start: float, earlier: float | None, **_: Any) -> None:
        """The worker's handler of ``ANSWER_OP`` (run in its event loop)."""
        with self.lock:
            entry = self.waiting.get((key, start))
        if entry is not None:
            entry[1] = earlier
            entry[0].set()


def _claims_of(worker: Any) -> WorkerClaims:
    claims: WorkerClaims = vars(worker).setdefault(CLAIMS_ATTRIBUTE, WorkerClaims())
    # Before any claim is sent on the stream: the answer finds its handler.
    worker.stream_handlers.setdefault(ANSWER_OP, claims.answered)
    return claims


def claim(
    worker: Any, key: str, start: float, unanswered: Callable[[], None]
) -> Callable[[], float | None]:
    """On ``worker`` (in one of its task threads): claim the start of ``key``'s program.
    What it returns waits for the answer: the time an earlier run started, if there was
    one (its worker was lost and the scheduler sent the task again), or None (this is
    its first run, or the scheduler did not answer: then ``unanswered`` was called).
    A claim by a call is answered before this returns; one on the stream meanwhile."""
    claims = _claims_of(worker)
    stream = getattr(worker.batched_stream, "comm", None)
    if stream is None or claims.taught is not stream:
        earlier = _by_call(key, start)
        claims.taught = stream
        return lambda: earlier
    entry: list[Any] = [threading.Event(), None]
    with claims.lock:
        claims.waiting[(key, start)] = entry
    event = {"op": "log-event", "topic": CLAIM_TOPIC, "msg": {"key": key, "start": start}}
    worker.loop.add_callback(send_now, worker.batched_stream, event)

    def answer() -> float | None:
        try:
            if entry[0].wait(CLAIM_TIMEOUT):
                earlier: float | None = entry[1]
                return earlier
        finally:
            with claims.lock:
                claims.waiting.pop((key, start), None)
        claims.taught = None  # not answered on the stream: taught again by a call
        try:
            return _by_call(key, start)
        except Exception:
            unanswered()
            return None

    return answer


def send_now(stream: Any, message: dict[str, Any]) -> None:
    """Send ``message`` on ``stream`` (a ``distributed`` BatchedSend, in its event loop)
    at once, not after the stream's interval since its last batch: a task waits for a
    claim's answer. The messages before it on the stream go with it, in their order.
    (A stream without these attributes sends it after its interval.)"""
    stream.send(message)
    with contextlib.suppress(AttributeError):
        stream.next_deadline = None
        stream.waker.set()


def _by_call(key: str, start: float) -> float | None:
    """The claim by a call of its own, which also teaches the scheduler to answer the
    claims of the workers' streams; raises what the call raises."""
    from distributed import get_client

    client = get_client()
    earlier: float | None = client.sync(  # type: ignore[no-untyped-call]
        client._run_on_scheduler,
        claim_and_answer_streams,
        key,
        start,
        callback_timeout=CLAIM_TIMEOUT,
    )
    return earlier
