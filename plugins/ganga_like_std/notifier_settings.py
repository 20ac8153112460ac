"""The ``Notifier`` configuration section, registered under the ``ganga_like.config`` entry
points: where the ``Notifier`` postprocessor sends its mail (``c.Notifier.host = "smtp.org"``
in the config file, ``--Notifier.port=587`` on the command line). The postprocessor receives
it through its context (``ctx.config[Notifier]``)."""

from __future__ import annotations

from traitlets import Float, Int, Unicode
from traitlets.config import Configurable

__all__ = ["Notifier"]


class Notifier(Configurable):
    """The SMTP server the Notifier postprocessor sends its mail through."""

    host = Unicode("localhost", help="SMTP server host name.").tag(config=True)
    port = Int(25, min=1, max=65535, help="SMTP server port.").tag(config=True)
    user = Unicode("", help="User to log in as (empty: no login).").tag(config=True)
    password = Unicode("", help="Password for the login (with user).").tag(config=True)
    sender = Unicode("ganga@localhost", help="The From address of the notifications.").tag(
        config=True
    )
    timeout = Float(
        10.0, min=0.1, help="Seconds to wait for the SMTP server before giving up on a mail."
    ).tag(config=True)
