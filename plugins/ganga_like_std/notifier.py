"""Ganga's ``Notifier`` postprocessor: an e-mail when a job (a master, or a job that was not
split) completes or fails, and with ``verbose=True`` one for each failed subjob. Sent by the
monitoring process after the other postprocessors (see ``ganga_like.runtime.postprocessing``),
through the SMTP server of the ``Notifier`` configuration section."""

from __future__ import annotations

import re
import smtplib
import socket
from email.message import EmailMessage
from typing import Any, ClassVar

import traitlets

from ganga_like.errors import PostProcessError
from ganga_like.model.interfaces import IPostProcessor, PostProcessContext
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like_std.notifier_settings import Notifier as NotifierSection

__all__ = ["EmailAddress", "Notifier"]

# One address, loosely: what matters is catching a name, a list or a typo before submission.
_ADDRESS = re.compile(r"[^@\s,;<>()\"']+@[^@\s,;<>()\"']+\Z")


class EmailAddress(traitlets.Unicode):  # type: ignore[type-arg]
    """An e-mail address (``user@host``), checked when set; empty means unset."""

    info_text = 'an e-mail address, e.g. "me@example.org"'

    def validate(self, obj: Any, value: Any) -> str:
        text: str = super().validate(obj, value)
        if text and not _ADDRESS.match(text):
            raise traitlets.TraitError(f"expected {self.info_text}, got {text!r}")
        return text


def _message(job: Job, sender: str, to: str) -> EmailMessage:
    status = job.current_status().label
    msg = EmailMessage()
    # A name may hold line breaks; a mail header may not (the message would not be built).
    name = f" ({' '.join(job.name.split())})" if job.name else ""
    msg["Subject"] = f"ganga job {job.fqid}{name} {status}"
    msg["From"] = sender
    msg["To"] = to
    lines = [f"Job {job.fqid}{name} is {status}."]
    if job.exit_code is not None:
        lines.append(f"Exit code: {job.exit_code}")
    if job.is_master:
        counts: dict[str, int] = {}
        for sj in job.iter_subjobs():
            label = sj.current_status().label
            counts[label] = counts.get(label, 0) + 1
        lines.append("Subjobs: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    if job.history:
        lines.append(f"Last event: {job.history[-1][3]}")
    msg.set_content("\n".join(lines) + "\n")
    return msg


class Notifier(IPostProcessor):
    """``Notifier(address="me@example.org", verbose=False)``: mail ``address`` when the job
    completes or fails; ``verbose=True`` also mails each failed subjob."""

    kind = "notifier"
    config_sections = (NotifierSection,)
    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "address": EmailAddress(help="Where the notifications go."),
        "verbose": traitlets.Bool(False, help="Also send one mail for each failed subjob."),
    }

    def check_before_submit(self) -> None:
        if not self.address:
            raise PostProcessError('Notifier: set address="..." (an e-mail address)')

    def notify(self, job: Job, ctx: PostProcessContext) -> list[str]:
        """Send the mails for ``job``, which has ended; why each mail not sent was not
        (one line each, for the job's event log). Never raises for a server problem."""
        config = ctx.config[NotifierSection]
        about = [job]
        if self.verbose and job.is_master:
            about += [sj for sj in job.iter_subjobs() if sj.current_status() is Status.FAILED]
        messages = [_message(j, config.sender, self.address) for j in about]
        try:
            self._send(config, messages)
        except (OSError, smtplib.SMTPException) as exc:
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return [f"notification to {self.address} not sent: {type(exc).__name__}: {why}"]
        return []

    @staticmethod
    def _send(config: NotifierSection, messages: list[EmailMessage]) -> None:
        # One connection for all of the job's mails; the timeout bounds each socket call, so
        # a server that hangs delays the monitor by at most that long.
        try:
            smtp = smtplib.SMTP(config.host, config.port, timeout=config.timeout)
        except socket.gaierror as exc:
            raise OSError(f"unknown host {config.host}: {exc.strerror}") from None
        with smtp:
            if config.user:
                smtp.ehlo_or_helo_if_needed()
                if smtp.has_extn("starttls"):
                    smtp.starttls()
                    smtp.ehlo()
                smtp.login(config.user, config.password)
            for msg in messages:
                smtp.send_message(msg)
