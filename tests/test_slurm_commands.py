"""Tests of the Slurm command layer: pure parsing/rendering, then a real Slurm.

Tests marked ``slurm`` need a running cluster (``eval "$(bash scripts/start-slurm.sh)"``)
and skip, saying why, when there is none.  Sample outputs in the unit tests were
captured from Slurm 22.05.8.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from ganga_like_slurm import slurm_commands
from ganga_like_slurm.partitions import (
    NodeInfo,
    PartitionInfo,
    choose_partition,
    parse_gpus,
    parse_scontrol_partitions,
    parse_sinfo_nodes,
)
from ganga_like_slurm.resource_spec import (
    ResourceError,
    ResourceSpec,
    format_slurm_time,
    parse_memory,
    parse_slurm_time,
)
from ganga_like_slurm.sbatch_script import (
    BatchScriptSpec,
    ElementCommand,
    ScriptError,
    compress_indices,
    expand_indices,
    render_script,
)
from ganga_like_slurm.slurm_commands import (
    SacctRow,
    SlurmCommandError,
    SqueueRow,
    is_transient,
    parse_sacct,
    parse_sbatch_output,
    parse_squeue,
)
from ganga_like_slurm.states import STATE_TABLE, Observation, UnknownStateError, classify

from .slurm_up import slurm_answers

# Arguments that a shell would mangle; they must reach the program byte for byte.
AWKWARD_ARGS = [
    "two words",
    "it's",
    'say "hi"',
    "$HOME ${PATH}",
    "`id` $(id)",
    "line one\nline two",
    "ünïcødé ✓ 日本",
    "*",
    "",
    "-n",
    "back\\slash",
    "; rm -rf / #",
]

# Prints its argv, selected environment variables and cwd as JSON.
ECHO_PROGRAM = (
    "import json, os, sys\n"
    "keys = ['GANGA_JOB_ID', 'GANGA_SUBJOB_ID', 'GANGA_MASTER_ID', 'GANGA_FQID', 'AWKWARD']\n"
    "print(json.dumps({'argv': sys.argv[1:], 'env': {k: os.environ.get(k) for k in keys},"
    " 'cwd': os.getcwd()}))\n"
    "sys.exit(int(os.environ.get('EXIT_WITH', '0')))\n"
)

FINAL_STATUSES = {"completed", "failed", "killed"}


# --- resources --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2G", 2 * 1024**3),
        ("500M", 500 * 1024**2),
        ("1.5GiB", 3 * 1024**3 // 2),
        ("64k", 64 * 1024),
        ("2048", 2048),
        (" 1 T ", 1024**4),
        (4096, 4096),
    ],
)
def test_parse_memory(text: int | str, expected: int) -> None:
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text", ["-1G", "lots", "2X", "G"])
def test_parse_memory_rejects(text: str) -> None:
    with pytest.raises(ResourceError):
        parse_memory(text)


def test_resource_spec_accepts_memory_string() -> None:
    assert ResourceSpec(memory="2G").memory == 2 * 1024**3  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("UNLIMITED", None),
        ("INFINITE", None),
        ("00:10:00", timedelta(minutes=10)),
        ("5", timedelta(minutes=5)),
        ("5:30", timedelta(minutes=5, seconds=30)),
        ("1-00:00:00", timedelta(days=1)),
        ("2-12", timedelta(days=2, hours=12)),
        ("1-02:03", timedelta(days=1, hours=2, minutes=3)),
    ],
)
def test_parse_slurm_time(text: str, expected: timedelta | None) -> None:
    assert parse_slurm_time(text) == expected


def test_format_slurm_time() -> None:
    assert format_slurm_time(timedelta(minutes=5)) == "0-00:05:00"
    assert format_slurm_time(timedelta(days=2, hours=3, seconds=4.2)) == "2-03:00:05"


def test_to_sbatch_lines_golden() -> None:
    spec = ResourceSpec(
        process_count=8,
        processes_per_node=4,
        cpu_cores_per_process=2,
        gpus_per_process=1,
        memory=parse_memory("3G"),
        walltime=timedelta(hours=1, minutes=30),
    )
    assert spec.to_sbatch_lines() == [
        "#SBATCH --ntasks=8",
        "#SBATCH --ntasks-per-node=4",
        "#SBATCH --nodes=2",
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --gpus-per-task=1",
        "#SBATCH --mem=3072M",
        "#SBATCH --time=0-01:30:00",
    ]
    assert ResourceSpec().to_sbatch_lines() == ["#SBATCH --ntasks=1", "#SBATCH --cpus-per-task=1"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (ResourceSpec(process_count=0), "process_count must be a positive integer"),
        (ResourceSpec(cpu_cores_per_process=-2), "cpu_cores_per_process must be a positive"),
        (ResourceSpec(gpus_per_process=-1), "gpus_per_process must be a non-negative"),
        (ResourceSpec(process_count=2, processes_per_node=4), "exceeds process_count"),
        (ResourceSpec(process_count=6, processes_per_node=4), "not divisible"),
        (ResourceSpec(processes_per_node=0), "processes_per_node must be a positive"),
        (ResourceSpec(memory=-5), "memory must be a positive"),
        (ResourceSpec(walltime=timedelta(0)), "walltime must be a positive"),
    ],
)
def test_validate_rejects(spec: ResourceSpec, message: str) -> None:
    with pytest.raises(ResourceError, match=message):
        spec.validate()


def test_validate_lists_every_problem() -> None:
    with pytest.raises(ResourceError) as info:
        ResourceSpec(process_count=0, memory=-1).validate()
    assert "process_count" in str(info.value)
    assert "memory" in str(info.value)


# --- script -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("indices", "text"),
    [
        (range(100), "0-99"),
        ([1, 4, 7, 8, 9], "1,4,7-9"),
        ([5], "5"),
        ([3, 1, 2, 2, 10, 11], "1-3,10-11"),
    ],
)
def test_compress_indices(indices: list[int], text: str) -> None:
    assert compress_indices(indices) == text
    assert expand_indices(text) == sorted(set(indices))


def test_expand_indices_reads_slurm_forms() -> None:
    assert expand_indices("[1-3,5%1]") == [1, 2, 3, 5]
    assert expand_indices("0-10:5") == [0, 5, 10]


SMALL_ARRAY_GOLDEN = """\
#!/bin/bash
#SBATCH --job-name="my job"
#SBATCH --partition=short
#SBATCH --account=physics
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --time=0-00:05:00
#SBATCH --array=0-1,5%2
#SBATCH --output=/out/%A_%a.log
#SBATCH --error=/out/%A_%a.err
#SBATCH --chdir="/work dir"
#SBATCH --hold
module load foo
case "${SLURM_ARRAY_TASK_ID-}" in
0)
    export GANGA_JOB_ID=12
    export GANGA_SUBJOB_ID=0
    export GANGA_FQID=12.0
    cd -- /w/0 || exit 1
    exec /bin/echo 'a b' '$x' >/w/0/stdout 2>/w/0/stderr
    ;;
1)
    export GANGA_JOB_ID=12
    export GANGA_SUBJOB_ID=1
    export GANGA_FQID=12.1
    exec /bin/echo 'it'"'"'s' >'/w/1/std out' 2>&1
    ;;
5)
    export GANGA_JOB_ID=12
    export GANGA_SUBJOB_ID=5
    export GANGA_FQID=12.5
    exec /bin/true
    ;;
*)
    echo "no command for array task ${SLURM_ARRAY_TASK_ID-unset}" >&2
    exit 1
    ;;
esac
"""


def _small_array_spec() -> BatchScriptSpec:
    def env(i: int) -> dict[str, str]:
        return {"GANGA_JOB_ID": "12", "GANGA_SUBJOB_ID": str(i), "GANGA_FQID": f"12.{i}"}

    return BatchScriptSpec(
        job_name="my job",
        partition="short",
        account="physics",
        resources=ResourceSpec(walltime=timedelta(minutes=5)),
        extra_options=["--hold"],
        setup=["module load foo"],
        array_throttle=2,
        stdout="/out/%A_%a.log",
        stderr="/out/%A_%a.err",
        workdir="/work dir",
        commands={
            0: ElementCommand(
                ["/bin/echo", "a b", "$x"], env(0), "/w/0", "/w/0/stdout", "/w/0/stderr"
            ),
            1: ElementCommand(["/bin/echo", "it's"], env(1), None, "/w/1/std out", "/w/1/std out"),
            5: ElementCommand(["/bin/true"], env(5)),
            9: ElementCommand(["/bin/false"], env(9)),
        },
        array=(0, 1, 5),  # 9 is left out: resubmitting a subset
    )


def test_render_small_array_golden() -> None:
    assert render_script(_small_array_spec()) == SMALL_ARRAY_GOLDEN


SINGLE_JOB_GOLDEN = """\
#!/bin/bash
#SBATCH --job-name=single
#SBATCH --ntasks=4
#SBATCH --ntasks-per-node=2
#SBATCH --nodes=2
#SBATCH --cpus-per-task=1
#SBATCH --mem=500M
#SBATCH --output=/out/%j.log
export GANGA_JOB_ID=3
export GANGA_FQID=3
export MSG='x=$(date) "q"'
exec python3 -c 'print(1)' 'line
break'
"""


def test_render_single_job_golden() -> None:
    spec = BatchScriptSpec(
        job_name="single",
        resources=ResourceSpec(process_count=4, processes_per_node=2, memory=parse_memory("500M")),
        stdout="/out/%j.log",
        commands=ElementCommand(
            ["python3", "-c", "print(1)", "line\nbreak"],
            {"GANGA_JOB_ID": "3", "GANGA_FQID": "3", "MSG": 'x=$(date) "q"'},
        ),
    )
    assert render_script(spec) == SINGLE_JOB_GOLDEN


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (BatchScriptSpec("x", ElementCommand([])), "argv is empty"),
        (BatchScriptSpec("x", ElementCommand(["a"], {"BAD-NAME": "1"})), "variable name"),
        (BatchScriptSpec("x", {0: ElementCommand(["a"])}, array=(0, 3)), "index"),
        (BatchScriptSpec("x", ElementCommand(["a"]), array=(0,)), "mapping"),
        (BatchScriptSpec("x\ny", ElementCommand(["a"])), "newline"),
        (BatchScriptSpec("x", ElementCommand(["a"]), extra_options=["--a\n--b"]), "line"),
    ],
)
def test_render_rejects(spec: BatchScriptSpec, message: str) -> None:
    with pytest.raises(ScriptError, match=message):
        render_script(spec)


def test_render_1000_elements_is_fast() -> None:
    commands_ = {
        i: ElementCommand(
            ["/usr/bin/prog", "--input", f"/data/file {i}.root", "--seed", str(i), "it's"],
            {"GANGA_JOB_ID": "7", "GANGA_SUBJOB_ID": str(i), "GANGA_FQID": f"7.{i}"},
            f"/work/7/{i}",
            f"/work/7/{i}/stdout",
            f"/work/7/{i}/stderr",
        )
        for i in range(1000)
    }
    spec = BatchScriptSpec(job_name="big", commands=commands_)
    best = min(_timed(lambda: render_script(spec)) for _ in range(3))
    assert best < 0.050, f"rendering 1000 elements took {best * 1000:.1f} ms"
    assert "#SBATCH --array=0-999\n" in render_script(spec)


def _timed(fn: object) -> float:
    """CPU seconds of one call: unlike wall time, it does not grow when other work loads
    the machine, and the check is about this code's own cost."""
    assert callable(fn)
    start = time.process_time()
    fn()
    return time.process_time() - start


def test_rendered_script_runs_locally_with_exact_arguments(tmp_path: Path) -> None:
    """bash itself runs the script (no Slurm): arguments and env arrive unchanged."""
    commands_ = {
        i: ElementCommand(
            [sys.executable, "-c", ECHO_PROGRAM, *AWKWARD_ARGS, str(i)],
            {"GANGA_FQID": f"1.{i}", "AWKWARD": AWKWARD_ARGS[i]},
            str(tmp_path),
            str(tmp_path / f"out.{i}"),
        )
        for i in range(3)
    }
    script = tmp_path / "job.sh"
    script.write_text(render_script(BatchScriptSpec("local", commands_)), encoding="utf-8")
    subprocess.run(["bash", "-n", str(script)], check=True)
    for i in range(3):
        env = {**os.environ, "SLURM_ARRAY_TASK_ID": str(i)}
        subprocess.run(["bash", str(script)], check=True, env=env, timeout=30)
        record = json.loads((tmp_path / f"out.{i}").read_text(encoding="utf-8"))
        assert record["argv"] == [*AWKWARD_ARGS, str(i)]
        assert record["env"]["AWKWARD"] == AWKWARD_ARGS[i]
        assert record["cwd"] == str(tmp_path)
    # An index without a command fails loudly instead of doing nothing.
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "99"}
    result = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert result.returncode == 1
    assert "no command for array task 99" in result.stderr


# --- states -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "reason", "exit_code", "expected"),
    [
        (
            "PENDING",
            "JobArrayTaskLimit",
            "0:0",
            Observation("submitted", "pending (JobArrayTaskLimit)"),
        ),
        ("RUNNING", "None", "0:0", Observation("running", "running")),
        ("COMPLETING", None, "0:0", Observation("completing", STATE_TABLE["COMPLETING"][1])),
        (
            "COMPLETED",
            "JobArrayTaskLimit",
            "0:0",
            Observation("completed", STATE_TABLE["COMPLETED"][1], 0),
        ),
        ("FAILED", "NonZeroExitCode", "3:0", Observation("failed", "finished with exit code 3", 3)),
        (
            "TIMEOUT",
            "TimeLimit",
            "0:0",
            Observation("failed", "walltime exceeded", cause="timeout"),
        ),
        ("CANCELLED by 0", "None", "0:0", Observation("killed", "cancelled by uid 0")),
        ("CANCELLED", None, "0:15", Observation("killed", "cancelled (signal 15)", 143)),
        ("PREEMPTED", None, None, Observation("submitted", "preempted and requeued")),
        (
            "OUT_OF_MEMORY",
            None,
            "0:125",
            Observation("failed", "memory limit exceeded", None, "out_of_memory"),
        ),
        (  # killed by a real signal while out of memory: that signal is kept
            "OUT_OF_MEMORY",
            None,
            "0:9",
            Observation("failed", "memory limit exceeded (signal 9)", 137, "out_of_memory"),
        ),
        ("CA", None, None, Observation("killed", "cancelled")),
    ],
)
def test_classify(
    state: str, reason: str | None, exit_code: str | None, expected: Observation
) -> None:
    assert classify(state, reason, exit_code) == expected


def test_classify_blocked_pending_reason() -> None:
    observation = classify("PENDING", "PartitionTimeLimit", None)
    assert observation.status == "submitted"
    assert "MaxTime" in observation.reason


def test_every_required_state_is_mapped() -> None:
    required = [
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "REQUEUED",
        "SUSPENDED",
        "STOPPED",
        "RESIZING",
        "REVOKED",
        "SPECIAL_EXIT",
    ]
    for state in required:
        assert classify(state, None, None).status in {
            "submitted",
            "running",
            "completing",
            "completed",
            "failed",
            "killed",
        }
    with pytest.raises(UnknownStateError):
        classify("WEIRD", None, None)


# --- command output parsing and error classification -------------------------

# squeue --array -t all -o '%i|%A|%F|%K|%T|%r' on an array 0-5%1 while 0 runs,
# then a plain job, then (without --array) a compressed pending row.
SQUEUE_SAMPLE = """\
1_1|1|1|1|PENDING|JobArrayTaskLimit
1_2|1|1|2|PENDING|JobArrayTaskLimit
1_0|2|1|0|RUNNING|None
6|6|6|N/A|COMPLETED|None
30_[3-5%1]|30|30|3-5%1|PENDING|JobArrayTaskLimit
"""


def test_parse_squeue() -> None:
    rows = parse_squeue(SQUEUE_SAMPLE)
    assert rows["1_0"] == SqueueRow("1_0", "2", "1", 0, "RUNNING", None)
    assert rows["1_2"] == SqueueRow("1_2", "1", "1", 2, "PENDING", "JobArrayTaskLimit")
    assert rows["6"] == SqueueRow("6", "6", None, None, "COMPLETED", None)
    assert [rows[f"30_{i}"].state for i in (3, 4, 5)] == ["PENDING"] * 3
    assert len(rows) == 7


# sacct -n -P -X -o JobID,JobIDRaw,State,ExitCode,Reason,Start,End; sacct has no
# --array in 22.05, so pending elements stay compressed with their throttle.
SACCT_SAMPLE = """\
1_0|2|CANCELLED by 0|0:0|None|2026-11-22T05:08:11|2026-11-22T05:08:13
1_2|4|FAILED|3:0|JobArrayTaskLimit|2026-11-22T05:08:19|2026-11-22T05:08:24
1_[1-3,5%1]|1|PENDING|0:0|JobArrayTaskLimit|Unknown|Unknown
18|18|TIMEOUT|0:0|TimeLimit|2026-11-22T05:13:28|2026-11-22T05:14:35
"""


def test_parse_sacct() -> None:
    rows = parse_sacct(SACCT_SAMPLE)
    assert rows["1_0"].state == "CANCELLED"
    assert rows["1_0"].cancelled_by == "0"
    assert rows["1_0"].raw_state == "CANCELLED by 0"
    # The compressed row is read after 1_2, so its PENDING wins for 1_2 here.
    assert sorted(k for k, r in rows.items() if r.state == "PENDING") == [
        "1_1",
        "1_2",
        "1_3",
        "1_5",
    ]
    assert rows["1_5"] == SacctRow(
        "1_5", "1", "1", 5, "PENDING", None, "0:0", "JobArrayTaskLimit", None, None
    )
    assert rows["18"].array_task_id is None
    assert classify(rows["18"].state, rows["18"].reason, rows["18"].exit_code).reason == (
        "walltime exceeded"
    )


def test_parse_sbatch_output() -> None:
    assert parse_sbatch_output("42\n") == "42"
    assert parse_sbatch_output("42;cluster\n") == "42"
    with pytest.raises(SlurmCommandError):
        parse_sbatch_output("")


@pytest.mark.parametrize("bad", ["-u", "root", "12 13", "1_2_3", "--me"])
def test_job_ids_cannot_become_options(bad: str) -> None:
    with pytest.raises(ValueError, match="not Slurm job ids"):
        slurm_commands.squeue([bad])


# Messages captured from Slurm 22.05.8 (controller and slurmdbd stopped by pid, a
# controller with AccountingStorageEnforce=associations for "Invalid account").
TRANSIENT_MESSAGES = [
    "slurm_load_jobs error: Unable to contact slurm controller (connect failure)",
    "sbatch: error: Batch job submission failed: Unable to contact slurm controller "
    "(connect failure)",
    "scancel: error: Kill job error on job id 1_0: Unable to contact slurm controller "
    "(connect failure)",
    "slurm_load_partitions error: Unable to contact slurm controller (connect failure)",
    "sacct: error: slurm_persist_conn_open_without_init: failed to open persistent connection "
    "to host:localhost:16819: Connection refused\nsacct: error: Sending PersistInit msg: "
    "Connection refused\nsacct: error: Problem talking to the database: Connection refused",
    "squeue: error: slurm_receive_msg: Socket timed out on send/recv operation",
    "squeue timed out after 60s",
]
PERMANENT_MESSAGES = [
    "sbatch: error: invalid partition specified: nosuch\n"
    "sbatch: error: Batch job submission failed: Invalid partition name specified",
    "sbatch: error: Batch job submission failed: Invalid account or account/partition "
    "combination specified",
    "sbatch: error: Batch job submission failed: Invalid qos specification",
    "sbatch: error: Batch job submission failed: Requested reservation is invalid",
    "sbatch: error: Memory specification can not be satisfied\n"
    "sbatch: error: Batch job submission failed: Requested node configuration is not available",
    "sbatch: error: Invalid generic resource (gres) specification",
    "sbatch: error: Batch job submission failed: Invalid job array specification",
    "sbatch: error: Invalid --time specification",
    "sbatch: unrecognized option '--bogus'\nTry \"sbatch --help\" for more information",
    "sacct: fatal: Could not establish a configuration source",
    "Slurm accounting storage is disabled",
    "something nobody has seen before",
]


@pytest.mark.parametrize("message", TRANSIENT_MESSAGES)
def test_transient_messages(message: str) -> None:
    assert is_transient(message)


@pytest.mark.parametrize("message", PERMANENT_MESSAGES)
def test_permanent_messages(message: str) -> None:
    assert not is_transient(message)


# --- partitions -------------------------------------------------------------

SCONTROL_PARTITIONS = (
    "PartitionName=debug AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL "
    "Default=YES QoS=N/A DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 "
    "Hidden=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED "
    "Nodes=vm PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO "
    "OverTimeLimit=NONE PreemptMode=OFF State=UP TotalCPUs=16 TotalNodes=1 "
    "SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED "
    "MaxMemPerNode=UNLIMITED TRES=cpu=16,mem=24105M,node=1,billing=16\n"
    "PartitionName=short AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL "
    "Default=NO QoS=N/A DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 "
    "Hidden=NO MaxNodes=UNLIMITED MaxTime=00:10:00 MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED "
    "Nodes=vm PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO "
    "OverTimeLimit=NONE PreemptMode=OFF State=UP TotalCPUs=16 TotalNodes=1 "
    "SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED "
    "MaxMemPerNode=UNLIMITED TRES=cpu=16,mem=24105M,node=1,billing=16\n"
)
SINFO_NODES = "debug|vm|16|24105|(null)|idle\nshort|vm|16|24105|(null)|idle\n"


def _sample_partitions() -> list[PartitionInfo]:
    nodes = parse_sinfo_nodes(SINFO_NODES)
    return [
        replace(p, nodes=tuple(nodes[p.name]))
        for p in parse_scontrol_partitions(SCONTROL_PARTITIONS)
    ]


def test_parse_partitions() -> None:
    debug, short = _sample_partitions()
    assert (debug.name, debug.default, debug.max_time, debug.state) == ("debug", True, None, "UP")
    assert (short.name, short.default, short.max_time) == ("short", False, timedelta(minutes=10))
    assert short.max_nodes is None and short.max_mem_per_node is None
    assert (short.total_cpus, short.total_nodes) == (16, 1)
    assert short.nodes == (NodeInfo("vm", 16, 24105 * 1024**2, 0, "idle"),)


def test_parse_gpus() -> None:
    assert parse_gpus("(null)") == 0
    assert parse_gpus("gpu:2") == 2
    assert parse_gpus("gpu:a100:4(S:0-1),shard:8") == 4


def test_choose_partition_rules() -> None:
    debug, short = _sample_partitions()
    five_min = ResourceSpec(walltime=timedelta(minutes=5))
    assert choose_partition([debug, short], five_min) == "debug"
    # Default first, whatever Slurm's order.
    assert choose_partition([short, debug], five_min) == "debug"
    assert choose_partition([short, replace(debug, default=False)], five_min) == "short"
    # Limits are checked, with every partition's reason in the error.
    big = ResourceSpec(process_count=32, walltime=timedelta(hours=1))
    with pytest.raises(ResourceError) as info:
        choose_partition([debug, short], big)
    assert "debug: its 1 node(s) hold only 16 of 32" in str(info.value)
    assert "short: walltime 0-01:00:00 exceeds MaxTime 0-00:10:00" in str(info.value)
    assert choose_partition([replace(debug, state="DOWN"), short], five_min) == "short"
    too_much_memory = ResourceSpec(memory=parse_memory("1T"))
    with pytest.raises(ResourceError, match="MiB per node"):
        choose_partition([debug], too_much_memory)
    with pytest.raises(ResourceError, match="GPU"):
        choose_partition([debug], ResourceSpec(gpus_per_process=1))
    capped = replace(debug, max_nodes=1, nodes=(debug.nodes[0], replace(debug.nodes[0], name="b")))
    with pytest.raises(ResourceError, match="MaxNodes is 1"):
        choose_partition([capped], ResourceSpec(process_count=2, processes_per_node=1))
    assert choose_partition([capped], ResourceSpec(process_count=2)) == "debug"


# --- a real Slurm -------------------------------------------------------------


@pytest.fixture(scope="module")
def slurm() -> None:
    """Skip, saying why, unless a Slurm controller answers."""
    if shutil.which("sbatch") is None:
        pytest.skip("sbatch is not on PATH: start Slurm with scripts/start-slurm.sh")
    if not slurm_answers():
        pytest.skip(
            "the Slurm controller does not answer `scontrol ping` "
            f"(SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')})"
        )


def _observe(row: SqueueRow | SacctRow) -> Observation:
    exit_code = row.exit_code if isinstance(row, SacctRow) else None
    return classify(row.state, row.reason, exit_code)


def _wait_until_final(
    job_id: str, elements: list[str], timeout: float
) -> tuple[dict[str, SqueueRow], dict[str, SacctRow]]:
    """Poll (one squeue + one sacct per cycle) until sacct has every element finished."""
    deadline = time.monotonic() + timeout
    while True:
        before = slurm_commands.RUNNER.counts.copy()
        queue = slurm_commands.squeue([job_id])
        accounting = slurm_commands.sacct([job_id])
        used = slurm_commands.RUNNER.counts - before
        assert used == {"squeue": 1, "sacct": 1}, used
        # sacct trails squeue: wait for both to agree that everything is over.
        done = all(
            e in accounting
            and _observe(accounting[e]).status in FINAL_STATUSES
            and e in queue
            and _observe(queue[e]).status in FINAL_STATUSES
            for e in elements
        )
        if done:
            return queue, accounting
        if time.monotonic() > deadline:
            raise AssertionError(f"{job_id} not finished after {timeout}s: {queue} {accounting}")
        time.sleep(1)


def _wait_for(predicate: object, timeout: float, what: str) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def timeout_job(slurm: None, slurm_walltime_job: str | None) -> str:
    """A job that exceeds its 1-minute walltime (tests/conftest.py's, started by the first
    Slurm test of the run so that its 60-90 s overlap the other tests)."""
    assert slurm_walltime_job is not None  # the cluster answers: it was submitted
    return slurm_walltime_job


@pytest.mark.slurm
def test_array_runs_with_exact_arguments_and_env(
    slurm: None, timeout_job: str, tmp_path: Path
) -> None:
    del timeout_job  # only started early, checked in test_walltime_exceeded_is_timeout
    count, failing = 20, 7
    commands_: dict[int, ElementCommand] = {}
    for i in range(count):
        workdir = tmp_path / f"sub {i}"
        workdir.mkdir()
        env = {
            "GANGA_JOB_ID": "41",
            "GANGA_SUBJOB_ID": str(i),
            "GANGA_MASTER_ID": "41",
            "GANGA_FQID": f"41.{i}",
            "AWKWARD": AWKWARD_ARGS[i % len(AWKWARD_ARGS)],
        }
        if i == failing:
            env["EXIT_WITH"] = "3"
        commands_[i] = ElementCommand(
            [sys.executable, "-c", ECHO_PROGRAM, *AWKWARD_ARGS, str(i)],
            env,
            str(workdir),
            str(workdir / "stdout"),
            str(workdir / "stderr"),
        )
    spec = BatchScriptSpec(
        job_name="array-test",
        commands=commands_,
        stdout=str(tmp_path / "slurm-%A_%a.out"),
    )
    job_id = slurm_commands.sbatch(render_script(spec))
    assert job_id.isdigit()
    elements = [f"{job_id}_{i}" for i in range(count)]
    queue, accounting = _wait_until_final(job_id, elements, timeout=120)

    for i, element in enumerate(elements):
        observation = _observe(accounting[element])
        assert accounting[element].array_job_id == job_id
        assert accounting[element].array_task_id == i
        if i == failing:
            assert accounting[element].state == "FAILED"
            assert accounting[element].exit_code == "3:0"
            assert observation == Observation("failed", "finished with exit code 3", 3)
            assert queue[element].reason == "NonZeroExitCode"
        else:
            assert accounting[element].state == "COMPLETED", accounting[element]
            assert observation.status == "completed" and observation.exit_code == 0
        workdir = tmp_path / f"sub {i}"
        record = json.loads((workdir / "stdout").read_text(encoding="utf-8"))
        assert record["argv"] == [*AWKWARD_ARGS, str(i)]
        assert record["cwd"] == str(workdir)
        assert record["env"] == {
            "GANGA_JOB_ID": "41",
            "GANGA_SUBJOB_ID": str(i),
            "GANGA_MASTER_ID": "41",
            "GANGA_FQID": f"41.{i}",
            "AWKWARD": AWKWARD_ARGS[i % len(AWKWARD_ARGS)],
        }
        assert (workdir / "stderr").read_text() == ""


@pytest.mark.slurm
def test_cancel_pending_and_running_elements(slurm: None, tmp_path: Path) -> None:
    spec = BatchScriptSpec(
        job_name="cancel-test",
        commands={i: ElementCommand(["sleep", "60"]) for i in range(5)},
        array_throttle=1,  # keeps 1-4 pending while 0 runs
        stdout=str(tmp_path / "slurm-%A_%a.out"),
    )
    job_id = slurm_commands.sbatch(render_script(spec))
    running, pending = f"{job_id}_0", f"{job_id}_2"
    _wait_for(
        lambda: (
            slurm_commands.squeue([job_id])
            .get(running, SqueueRow("", "", None, None, "", None))
            .state
            == "RUNNING"
        ),
        30,
        f"{running} to run",
    )
    queue = slurm_commands.squeue([job_id])
    assert queue[pending].state == "PENDING" and queue[pending].reason == "JobArrayTaskLimit"
    # Pending elements share the array's raw id until they start.
    assert queue[pending].raw_job_id == job_id

    slurm_commands.scancel([running, pending])

    def cancelled_recorded() -> bool:
        rows = slurm_commands.sacct([job_id])
        return running in rows and rows[running].state == "CANCELLED"

    _wait_for(cancelled_recorded, 30, f"sacct to record {running} as CANCELLED")
    queue, accounting = slurm_commands.squeue([job_id]), slurm_commands.sacct([job_id])
    assert queue[running].state == "CANCELLED"
    assert _observe(accounting[running]).status == "killed"
    assert accounting[running].cancelled_by is not None  # "CANCELLED by <uid>"
    # Exactly that element: the throttle lets the next one start, the rest wait.
    assert {e for e, r in accounting.items() if r.state == "CANCELLED"} == {running}
    assert {e for e, r in queue.items() if r.state == "CANCELLED"} == {running}
    # A cancelled PENDING element vanishes: neither squeue (even -t all) nor sacct
    # lists it any more, so only the caller knows it was cancelled.
    assert pending not in queue
    assert pending not in accounting
    assert {f"{job_id}_{i}" for i in (1, 3, 4)} <= set(queue)

    # Cancelling the whole array: squeue lists each element CANCELLED; sacct keeps
    # the still-pending ones as one compressed "ID_[3-4%1]" row, expanded here.
    slurm_commands.scancel([job_id])
    queue, accounting = _wait_until_final(job_id, [f"{job_id}_{i}" for i in (0, 1, 3, 4)], 30)
    assert all(accounting[f"{job_id}_{i}"].state == "CANCELLED" for i in (0, 1, 3, 4))
    assert pending not in queue and pending not in accounting
    slurm_commands.scancel([job_id, pending])  # already gone: not an error


@pytest.mark.slurm
def test_sbatch_bad_partition_is_permanent(slurm: None) -> None:
    script = render_script(
        BatchScriptSpec("bad-partition", ElementCommand(["true"]), partition="no_such_partition")
    )
    with pytest.raises(SlurmCommandError) as info:
        slurm_commands.sbatch(script)
    assert not info.value.transient
    assert "invalid partition specified: no_such_partition" in info.value.message
    assert info.value.returncode == 1


def _config_value(key: str) -> str:
    result = subprocess.run(
        ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30, check=True
    )
    for line in result.stdout.splitlines():
        name, _, value = line.partition("=")
        if name.strip() == key:
            return value.strip()
    return ""


@pytest.mark.slurm
def test_sbatch_bad_account(slurm: None, tmp_path: Path) -> None:
    script = render_script(
        BatchScriptSpec(
            "bad-account",
            ElementCommand(["true"]),
            account="no_such_account",
            stdout=str(tmp_path / "out"),
        )
    )
    if "associations" in _config_value("AccountingStorageEnforce"):
        with pytest.raises(SlurmCommandError) as info:
            slurm_commands.sbatch(script)
        assert not info.value.transient
        assert "Invalid account" in info.value.message
        return
    # Without AccountingStorageEnforce=associations (the test cluster), sbatch
    # accepts any account and the job runs under the user's default account.
    job_id = slurm_commands.sbatch(script)
    account = subprocess.run(
        ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%a"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.strip()
    assert account != "no_such_account"
    slurm_commands.scancel([job_id])


@pytest.mark.slurm
def test_an_array_is_found_by_its_name_as_the_array_once_its_elements_run(
    slurm: None, tmp_path: Path
) -> None:
    """Each running element has a job id of its own: the name must give the array's,
    from squeue and, once squeue has forgotten it, from the accounting."""
    name = f"find-me-{os.getpid()}-{time.time_ns()}"
    gate = tmp_path / "gate"
    wait = ElementCommand(["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.1; done"])
    script = render_script(BatchScriptSpec(name, {0: wait, 1: wait}, stdout=str(tmp_path / "o")))
    array = slurm_commands.sbatch(script)
    try:
        _wait_for(
            lambda: [r.state for r in slurm_commands.squeue([array]).values()] == ["RUNNING"] * 2,
            120,
            "both elements to run",
        )
        assert slurm_commands.find_jobs_by_name([name, "no-such-name"]) == {name: array}
        gate.touch()
        _wait_for(
            lambda: slurm_commands.find_ended_jobs_by_name([name]) == {name: array},
            120,
            "the accounting to have it",
        )
    finally:
        gate.touch()
        slurm_commands.scancel([array])


@pytest.mark.slurm
def test_partitions_from_the_cluster(slurm: None) -> None:
    before = slurm_commands.RUNNER.counts.copy()
    partitions = slurm_commands.scontrol_show_partitions()
    assert slurm_commands.RUNNER.counts - before == {"scontrol": 1, "sinfo": 1}
    by_name = {p.name: p for p in partitions}
    debug, short = by_name["debug"], by_name["short"]
    assert debug.default and not short.default
    assert debug.max_time is None
    assert short.max_time == timedelta(minutes=10)
    assert debug.nodes and all(node.cpus > 0 and node.memory > 0 for node in debug.nodes)

    five_min = ResourceSpec(walltime=timedelta(minutes=5))
    hour = ResourceSpec(walltime=timedelta(hours=1))
    assert choose_partition(partitions, five_min) == "debug"  # the default comes first
    no_default = [replace(p, default=False) for p in partitions]
    short_first = sorted(no_default, key=lambda p: p.name != "short")
    assert choose_partition(short_first, five_min) == "short"
    assert choose_partition(short_first, hour) == "debug"
    with pytest.raises(ResourceError, match="short: walltime 0-01:00:00 exceeds MaxTime"):
        choose_partition([short], hour)


@pytest.mark.slurm
def test_walltime_exceeded_is_timeout(slurm: None, timeout_job: str) -> None:
    _, accounting = _wait_until_final(timeout_job, [timeout_job], timeout=180)
    row = accounting[timeout_job]
    assert row.state == "TIMEOUT"
    # sacct first gives the element 0:0, then 0:15 once the end of its batch step (killed
    # by SIGTERM) is recorded; the job ended long ago, so either may be read here.
    assert _observe(row) in (
        Observation("failed", "walltime exceeded", cause="timeout"),
        Observation("failed", "walltime exceeded (signal 15)", 143, "timeout"),
    )


def _start_script() -> Path | None:
    """The project's script that starts the test cluster (again)."""
    start = Path(__file__).resolve().parents[1] / "scripts" / "start-slurm.sh"
    return start if start.is_file() else None


def _slurmctld_pid() -> int | None:
    conf = os.environ.get("SLURM_CONF")
    test_dir = os.environ.get("SLURM_TEST_DIR") or (str(Path(conf).parents[1]) if conf else "")
    pid_file = Path(test_dir) / "run" / "slurmctld.pid"
    try:
        pid = int(pid_file.read_text().strip())
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError):
        return None
    return pid if comm == "slurmctld" else None


@pytest.fixture
def stoppable_controller(slurm: None) -> Iterator[tuple[int, Path]]:
    """The test cluster's slurmctld pid; restarts the cluster afterwards whatever happens."""
    start = _start_script()
    pid = _slurmctld_pid()
    if start is None or pid is None or os.geteuid() != 0:
        pytest.skip("needs root, start-slurm.sh and the slurmctld pid file of the test cluster")
    yield pid, start
    if not slurm_commands.ping():
        subprocess.run(["bash", str(start)], capture_output=True, timeout=180, check=False)


@pytest.mark.slurm
def test_controller_down_is_transient(
    stoppable_controller: tuple[int, Path], tmp_path: Path
) -> None:
    pid, start = stoppable_controller
    job_id = slurm_commands.sbatch(
        render_script(
            BatchScriptSpec("survivor", ElementCommand(["true"]), stdout=str(tmp_path / "out"))
        )
    )
    _wait_until_final(job_id, [job_id], timeout=60)

    os.kill(pid, 15)
    _wait_for(lambda: not Path(f"/proc/{pid}").exists(), 60, "slurmctld to stop")
    assert not slurm_commands.ping()
    started = time.monotonic()
    with pytest.raises(SlurmCommandError) as info:
        slurm_commands.squeue([job_id])
    assert info.value.transient
    assert "Unable to contact slurm controller" in info.value.message
    # Clients retry for a while before giving up (18 s measured on 22.05).
    assert time.monotonic() - started < slurm_commands.DEFAULT_TIMEOUT
    # sacct talks to slurmdbd, not the controller, so it still answers.
    assert slurm_commands.sacct([job_id])[job_id].state == "COMPLETED"

    restart = subprocess.run(
        ["bash", str(start)], capture_output=True, text=True, timeout=180, check=False
    )
    assert restart.returncode == 0, restart.stderr
    assert slurm_commands.ping()
    assert slurm_commands.squeue([job_id])[job_id].state == "COMPLETED"
