"""XRootDFile: a file on grid storage, read and written over XRootD (``root://`` URLs).

The transfers run where the (sub)job runs, in the program of ``xrootd_transfer`` that
every backend starts in front of the job's own (``RunSpec.wrapper``), with the field's
client (``xrdcp``/``xrdfs``) and the credentials of the environment there.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, ClassVar

import traitlets

from ganga_like.errors import JobError
from ganga_like.model.interfaces import IFile, RunSpec
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.model.text import Text
from ganga_like_std import xrootd_transfer

__all__ = ["INPUT_URLS_VARIABLE", "XRootDFile", "XRootDURL"]

# The URLs of the inputs not staged (``stage=False``), one a line: URLs hold ":", so
# they cannot join ``$GANGA_INPUTDATA``'s list.
INPUT_URLS_VARIABLE = "GANGA_INPUT_URLS"
_URL = re.compile(r"^(?:x?root)s?://[^/\s]+//\S")
_TOOL = os.path.abspath(xrootd_transfer.__file__)


class XRootDURL(Text):
    """``root://host[:port]//absolute/path`` (also ``xroot://``, ``roots://``): the double
    slash says the path is absolute; with one, XRootD takes it relative to a home."""

    def validate(self, obj: Any, value: Any) -> str:
        text = super().validate(obj, value)
        if not _URL.match(text):
            raise traitlets.TraitError(
                "expected an XRootD URL root://host[:port]//absolute/path (two slashes "
                f"before the path), got {text!r}"
            )
        return text


class XRootDFile(IFile):
    """``XRootDFile("root://host//path/data.root")``: as an input file or dataset entry it
    is fetched into the work directory before the program starts (``stage=False``: not
    fetched; its URL is in ``$GANGA_INPUT_URLS``, one a line, for programs that read it
    over XRootD themselves). As an output file, the files of the work directory matching
    ``namePattern`` (default: the URL's last part) are uploaded once the program has
    succeeded to ``url``, where ``{jid}``, ``{sid}`` and ``{name}`` become the job id,
    the subjob id (empty for a job not split) and the file's name; the (sub)job's copy
    then lists the URLs in ``locations``. A transfer that fails fails the (sub)job, its
    cause naming the URL."""

    remote = True
    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "url": XRootDURL(
            help="Input: the file's URL. Output: where to upload, with {jid}, {sid}, {name}."
        ),
        "namePattern": Text(
            what="a file name or glob pattern",
            help="Input: the name it is staged as. Output: the files to upload (a glob). "
            "Default: the URL's last part.",
        ),
        "stage": traitlets.Bool(
            True, help="Input: fetch it before the program starts (False: pass the URL)."
        ),
        "locations": traitlets.List(
            Text(), help="Output: the URLs the completed run uploaded to (read-only)."
        ).tag(protected=True, copyable=False),
    }
    _positional = ("url", "namePattern")

    url: str
    namePattern: str
    stage: bool
    locations: list[str]

    def _last_part(self) -> str:
        return str(self.url).rstrip("/").rsplit("/", 1)[-1]

    def input_path(self) -> str:
        name = str(self.namePattern or self._last_part())
        if os.path.isabs(name) or os.pardir in name.split("/"):
            # Fetched where the program runs: only into its work directory.
            raise JobError(
                f"XRootDFile({self.url!r}) as an input is fetched into the work directory: "
                f"namePattern must be a path below it, not {name!r}"
            )
        return name

    def output_pattern(self) -> str:
        if self.namePattern:
            return str(self.namePattern)
        last = self._last_part()
        if "{" in last:
            raise JobError(
                f"XRootDFile({self.url!r}) as an output file needs namePattern: which files "
                "of the work directory to upload"
            )
        return last

    @classmethod
    def wrap_run(
        cls, job: Job, spec: RunSpec, inputs: Sequence[IFile], outputs: Sequence[IFile]
    ) -> RunSpec:
        fetched = [f for f in inputs if isinstance(f, XRootDFile) and f.stage]
        by_url = [f.url for f in inputs if isinstance(f, XRootDFile) and not f.stage]
        env = dict(spec.env)
        if by_url:
            env[INPUT_URLS_VARIABLE] = "\n".join(by_url)
        if not fetched and not outputs:
            return RunSpec(spec.argv, env, spec.inputs, spec.output_patterns, spec.wrapper)
        master = job.master
        transfers = {
            "jid": str(master.id if master is not None else job.id),
            "sid": str(job.id) if master is not None else "",
            "fetch": [{"url": f.url, "name": f.input_path()} for f in fetched],
            "upload": [{"pattern": f.output_pattern(), "url": f.url} for f in outputs],
        }
        patterns = spec.output_patterns
        if outputs:
            patterns = (*patterns, xrootd_transfer.UPLOADED_FILE)
        wrapper = (sys.executable, _TOOL, json.dumps(transfers), "--", *spec.wrapper)
        return RunSpec(spec.argv, env, spec.inputs, patterns, wrapper)

    def recorded(self, job: Job, output_dir: str) -> IFile:
        """With the URLs the run uploaded to, read from the list the transfer program left
        (collected into ``output_dir``); none when there is no list (the run failed)."""
        urls: list[str] = []
        if Status.parse(job.status) is Status.COMPLETED:
            urls = self._uploaded(output_dir)
        if urls == list(self.locations):
            return self
        copy = self._copy()
        copy._assign("locations", urls)
        return copy

    def _uploaded(self, output_dir: str) -> list[str]:
        try:
            with open(os.path.join(output_dir, xrootd_transfer.UPLOADED_FILE)) as handle:
                uploads = json.load(handle)["uploads"]
            for entry in uploads:
                if entry["url"] == self.url and entry["pattern"] == self.output_pattern():
                    return [str(url) for url in entry["urls"]]
        except (OSError, ValueError, KeyError, TypeError, JobError):
            pass
        return []
