"""Bad input gets one clear error and changes nothing stored."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import pytest
import traitlets
import transaction

from ganga_like import (
    ArgSplitter,
    CustomChecker,
    CustomMerger,
    Dask,
    DatasetSplitter,
    Executable,
    FileChecker,
    GangaDataset,
    GangaError,
    GenericSplitter,
    Job,
    JobError,
    JobTemplate,
    Local,
    LocalFile,
    Pilot,
    PluginError,
    PythonFunction,
    Resources,
    Retry,
    SchemaError,
    Slurm,
    TextMerger,
    config,
    jobs,
    plugin,
)
from ganga_like.model import plugin_registry
from ganga_like.repository.registry import Registry
from ganga_like.runtime.session import Session


def stored_state(session: Session, job_id: int) -> tuple[object, ...]:
    """The job as another connection sees it on disk."""
    conn = session.repo.db.open(transaction_manager=transaction.TransactionManager())
    try:
        job = Registry(conn.root()).get(job_id)
        assert job is not None
        return (job.status, job.subjob_count(), job.history, job.submit_count, job.name)
    finally:
        conn.close()


def test_submitting_a_job_twice_is_refused(session: Session) -> None:
    j = Job(application=Executable(exe="true"))
    j.submit()
    before = stored_state(session, j.id)
    with pytest.raises(JobError, match=r"only a new job can be submitted; use resubmit\(\)"):
        j.submit()
    assert stored_state(session, j.id) == before


@pytest.mark.parametrize(
    ("splitter", "message"),
    [
        (DatasetSplitter(files_per_subjob=2), "DatasetSplitter needs job.inputdata"),
        (
            GenericSplitter(multi_attrs={"application.args": [["1"]], "name": ["a", "b"]}),
            "value lists differ in length",
        ),
        (GenericSplitter(), "set attribute and values, or multi_attrs"),
        (
            GenericSplitter(attribute="application.args", values=["not-a-list"]),
            r"subjob 0: Executable\.args: expected a list",
        ),
        (GenericSplitter(attribute="status", values=["completed"]), "cannot set 'status'"),
        (ArgSplitter(args=[]), "produced no subjobs"),
    ],
)
def test_impossible_splits_leave_the_job_new_and_unchanged(
    session: Session, splitter: object, message: str
) -> None:
    j = Job(application=Executable(exe="echo"), splitter=splitter)
    before = stored_state(session, j.id)
    with pytest.raises(JobError, match=message):
        j.submit()
    assert j.status == "new" and j.subjobs == []
    assert stored_state(session, j.id) == before


def test_wrong_values_in_constructors_store_no_job(session: Session) -> None:
    with pytest.raises(SchemaError, match=r"Job\.name"):
        Job(name=3)
    with pytest.raises(SchemaError, match="Job has no attribute 'aplication'"):
        Job(aplication=Executable())
    with pytest.raises(PluginError, match="no plugin named 'Nope'"):
        Job(backend="Nope")
    assert len(jobs) == 0


def test_wrong_splitter_values_are_refused_at_assignment(session: Session) -> None:
    j = Job()
    with pytest.raises(SchemaError, match=r"ArgSplitter\.args"):
        j.splitter = ArgSplitter(args=["flat"])
    with pytest.raises(SchemaError, match=r"DatasetSplitter\.files_per_subjob"):
        DatasetSplitter(files_per_subjob=0)
    assert j.splitter is None


def test_killing_or_resubmitting_in_the_wrong_state(session: Session) -> None:
    j = Job()
    with pytest.raises(JobError, match="nothing to kill"):
        j.kill()
    with pytest.raises(JobError, match="only failed, killed or completed"):
        j.resubmit()
    with pytest.raises(JobError, match="force_status accepts"):
        j.force_status("running")


def test_bad_job_ids(session: Session) -> None:
    with pytest.raises(JobError, match="no job 42"):
        jobs(42)
    with pytest.raises(JobError, match="expected a job id"):
        jobs("x.y")
    with pytest.raises(JobError, match="out of range"):
        jobs[5]


# -- every attribute of every plugin: values that cannot be shown or stored -------------


class Unshowable:
    """A user's object whose repr() raises (so does str())."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")

    __str__ = __repr__


def _gpi_class(name: str) -> type:
    import ganga_like

    cls: type = getattr(ganga_like, name)
    return cls


def _writable(impl: type) -> list[str]:
    return [
        attr
        for attr, trait in impl._schema.items()
        if not trait.metadata.get("hidden") and not trait.metadata.get("protected")
    ]


# Every registered plugin's writable attributes, and the job's and template's own.
EVERY_ATTRIBUTE = [
    (name, attr)
    for name in [*plugin_registry.known_names(), "Job", "JobTemplate"]
    for attr in _writable(_gpi_class(name)._impl_class)
]
INT_ATTRIBUTES = [
    (name, attr)
    for name, attr in EVERY_ATTRIBUTE
    if isinstance(_gpi_class(name)._impl_class._schema[attr], traitlets.Int)
]


def _one_line_naming(error: BaseException, cls: str, attr: str) -> str:
    text = str(error)
    assert "\n" not in text, text
    assert text.startswith(f"{cls}.{attr}: "), text
    return text


@pytest.mark.parametrize("given", ["itself", "in a list", "in a dict"])
@pytest.mark.parametrize(("cls", "attr"), EVERY_ATTRIBUTE)
def test_a_value_whose_repr_raises_is_refused_in_one_line_on_every_attribute(
    session: Session, cls: str, attr: str, given: str
) -> None:
    value = {"itself": Unshowable(), "in a list": [Unshowable()], "in a dict": {"k": Unshowable()}}
    obj = _gpi_class(cls)()
    before = repr(obj)
    with pytest.raises(SchemaError) as refused:
        setattr(obj, attr, value[given])
    _one_line_naming(refused.value, cls, attr)
    assert repr(obj) == before
    with pytest.raises(SchemaError) as refused:
        _gpi_class(cls)(**{attr: value[given]})
    _one_line_naming(refused.value, cls, attr)


@pytest.mark.parametrize("given", [True, False, 10**30, -(10**30)])
@pytest.mark.parametrize(("cls", "attr"), INT_ATTRIBUTES)
def test_whole_number_attributes_refuse_booleans_and_absurd_sizes(
    session: Session, cls: str, attr: str, given: int
) -> None:
    obj = _gpi_class(cls)()
    before = repr(obj)
    with pytest.raises(SchemaError) as refused:
        setattr(obj, attr, given)
    text = _one_line_naming(refused.value, cls, attr)
    assert f"got {given!r}" in text
    assert repr(obj) == before


def test_a_value_that_cannot_be_stored_is_refused_when_set(session: Session) -> None:
    j = Job(application=Executable(exe="echo"))
    before = stored_state(session, j.id)
    with pytest.raises(SchemaError) as refused:
        j.splitter = GenericSplitter(attribute="application.args", values=[lambda: 1])
    text = _one_line_naming(refused.value, "GenericSplitter", "values")
    assert "cannot be stored in the repository" in text
    assert j.splitter is None and stored_state(session, j.id) == before
    with pytest.raises(SchemaError, match=r"^GenericSplitter\.multi_attrs: .*cannot be stored"):
        GenericSplitter(multi_attrs={"application.args": [threading.Lock()]})


@pytest.mark.parametrize(
    ("make", "where", "says"),
    [
        (lambda: Slurm(resources={1: 2}), "Slurm.resources", "the key 1, which is not a"),
        (lambda: Slurm(pilot={None: 2}), "Slurm.pilot", "the key None, which is not a"),
        (lambda: CustomMerger(module="/tmp/a\0b.py"), "CustomMerger.module", "NUL byte"),
        (lambda: CustomChecker(module="/tmp/a\0b.py"), "CustomChecker.module", "NUL byte"),
        (lambda: Pilot(cores=True), "Pilot.cores", "got True"),
        (lambda: Local(process_count=5000), "Local.process_count", "at most 4096), got 5000"),
        (
            lambda: Slurm(extra_options=["--exclusive", "constraint=avx2"]),
            "Slurm.extra_options",
            "expected a single-line sbatch option, such as '--constraint=avx2', not the str",
        ),
        (lambda: Dask(process_count=10**6), "Dask.process_count", "at most 4096), got 1000000"),
        (lambda: Pilot(nodes=10**30), "Pilot.nodes", "got 10000"),
        (lambda: Retry(attempts=10**30), "Retry.attempts", "at most 100), got 10000"),
        (lambda: Retry(attempts=True), "Retry.attempts", "got True"),
        (lambda: Retry(grow={"walltime": math.inf}), "Retry.grow", "inf for 'walltime'"),
        (lambda: Retry(grow={"memory": math.nan}), "Retry.grow", "nan for 'memory'"),
        (lambda: Retry(grow={"memory": -2}), "Retry.grow", "-2 for 'memory' (below 1)"),
        (lambda: Retry(grow={"memory": 1e300}), "Retry.grow", "(above 100)"),
        (lambda: Resources(walltime="9999999999"), "Resources.walltime", "at most 365 days"),
        (lambda: Resources(memory="1e400G"), "Resources.memory", "at most 1P"),
        (lambda: Dask(address="tcp://host\0:8786"), "Dask.address", "holds a NUL byte"),
        (lambda: Dask(address="tcp://host:8786\n"), "Dask.address", "holds a newline"),
        (lambda: Dask(address="file:///etc/passwd"), "Dask.address", "file:// is not a protocol"),
        (lambda: Dask(address="tcp://host"), "Dask.address", "names no port"),
        (lambda: Executable(exe="ls\0"), "Executable.exe", "without a NUL byte"),
        (lambda: Executable(exe=""), "Executable.exe", "name found on PATH, not empty"),
        (lambda: Job(name="a\0b"), "Job.name", "a name, without a NUL byte"),
        (lambda: JobTemplate(name="\0"), "JobTemplate.name", "without a NUL byte"),
        (lambda: Executable(args=["a", "b\0"]), "Executable.args", "without a NUL byte"),
        (lambda: Executable(env={"A": "1\0"}), "Executable.env", "values that are a string"),
        (lambda: Executable(env={"A\0": "1"}), "Executable.env", "keys that are an environment"),
        (lambda: Executable(env={"A=B": "1"}), "Executable.env", "keys that are an environment"),
        (lambda: PythonFunction(env={"A": "\0"}), "PythonFunction.env", "values that are"),
        (lambda: PythonFunction(python="py\0"), "PythonFunction.python", "NUL byte"),
        (lambda: GangaDataset(files=["a\0"]), "GangaDataset.files", "NUL byte"),
        (lambda: TextMerger(files=["out\0"]), "TextMerger.files", "NUL byte"),
        (lambda: LocalFile("in\0.txt"), "LocalFile.namePattern", "NUL byte"),
        # A merger's files are inside the subjobs' output directories: outside them it
        # would read, and with overwrite=True replace, the user's own files.
        (
            lambda: TextMerger(files=["/home/me/notes.txt"], overwrite=True),
            "TextMerger.files",
            "(this is an absolute path), not the str '/home/me/notes.txt'",
        ),
        (lambda: CustomMerger(files=["../../x"]), "CustomMerger.files", "through '..'"),
        (lambda: FileChecker(files=["~/notes"]), "FileChecker.files", "absolute path"),
        (
            lambda: GangaDataset(files=["/data/a.root", "root://eos//b.root"]),
            "GangaDataset.files",
            "(GangaDataset fetches nothing), got the root:// URL 'root://eos//b.root'",
        ),
    ],
)
def test_nonsense_is_refused_when_set_in_one_line(
    session: Session, make: Callable[[], object], where: str, says: str
) -> None:
    cls, attr = where.split(".")
    with pytest.raises(SchemaError) as refused:
        make()
    assert says in _one_line_naming(refused.value, cls, attr)


def test_a_refused_name_or_program_leaves_the_job_as_it_was(session: Session) -> None:
    j = Job(name="scan", application=Executable(exe="true"))
    for change in (lambda: setattr(j, "name", "a\0b"), lambda: setattr(j.application, "exe", "")):
        with pytest.raises(SchemaError):
            change()
    assert (j.name, j.application.exe) == ("scan", "true")
    j.name = "two\nlines\tand a tab"  # other control characters are kept, shown on one row
    assert j.name == "two\nlines\tand a tab"


@pytest.mark.parametrize(
    ("url", "scheme", "tool"),
    [
        ("s3://bucket/key.txt", "s3://", "aws s3 cp"),
        ("file:///tmp/data.txt", "file://", ""),
        ("https://example.org/data.txt", "https://", "curl"),
    ],
)
def test_a_url_given_to_localfile_is_refused_saying_what_to_do(
    session: Session, url: str, scheme: str, tool: str
) -> None:
    j = Job(application=Executable(exe="cat"))
    before = stored_state(session, j.id)
    with pytest.raises(SchemaError) as refused:
        j.inputfiles = [LocalFile(url)]
    text = _one_line_naming(refused.value, "LocalFile", "namePattern")
    assert (
        f"expected a path on this machine (LocalFile fetches nothing), got the {scheme} URL" in text
    )
    assert "copy the file here first" in text and tool in text
    assert j.inputfiles == [] and stored_state(session, j.id) == before
    with pytest.raises(SchemaError, match=r"^LocalFile\.localDir: .*URL"):
        LocalFile("data.txt", url)


def test_sound_values_of_the_same_attributes_are_still_taken(session: Session) -> None:
    """The refusals above are of nonsense only."""
    assert Dask(address="tcp://127.0.0.1:8786").address == "tcp://127.0.0.1:8786"
    assert Dask(address="scheduler:8786").address == "scheduler:8786"
    assert Dask(address="tls://[::1]:8786").address == "tls://[::1]:8786"
    assert Executable(args=["a b", "line\nbreak", 3], env={"X": "1\n2"}).args == [
        "a b",
        "line\nbreak",
        "3",
    ]
    assert Retry(attempts=100, grow={"walltime": 100, "memory": 1.5}).attempts == 100
    assert LocalFile("C:data.txt").namePattern == "C:data.txt"
    assert TextMerger(files=["sub/*.txt", "a..b", ".hidden"]).files == [
        "sub/*.txt",
        "a..b",
        ".hidden",
    ]
    assert GenericSplitter(attribute="application.args", values=[["1"], [2.5]]).values == [
        ["1"],
        [2.5],
    ]


@pytest.mark.parametrize(
    ("act", "starts"),
    [
        (lambda: setattr(config.Local, "max_concurrent", Unshowable()), "Local.max_concurrent: "),
        (lambda: setattr(config.Display, "columns", [Unshowable()]), "Display.columns: "),
        (
            lambda: setattr(config.Display, "status_colours", {"failed": Unshowable()}),
            "Display.status_colours: ",
        ),
        (lambda: Job().wait(until=Unshowable()), "unknown status a Unshowable object"),
        (lambda: Job(backend=Unshowable()), "Job.backend: "),
        (lambda: plugin(Unshowable()), "a plugin is named by a string, got a Unshowable"),
    ],
)
def test_a_value_whose_repr_raises_gets_one_line_elsewhere_too(
    session: Session, act: Callable[[], object], starts: str
) -> None:
    with pytest.raises(GangaError) as refused:
        act()
    text = str(refused.value)
    assert "\n" not in text and starts in text and "repr() raises RuntimeError" in text
