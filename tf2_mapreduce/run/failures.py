"""What a failed round of map steps means, and what the run does next: retry it, stop for
the cluster, run a failed step's pieces in parts, skip an input, or fail the job. Pure:
read from TensorFlow's errors and the facts the runner gathered, and tested on messages
TensorFlow produced (tests/unit/test_failure_text.py). Matching TF's text is confined to the
small functions below, each with the reason it exists.
"""

import codecs
import re
from dataclasses import dataclass, field

import tensorflow as tf

from tf2_mapreduce.errors import (
    CANNOT_WRITE,
    MAP_OUTPUT,
    ClusterError,
    JobFailed,
    MapOutputError,
    OutputError,
    connectivity_errors,
    op_error_cause,
)
from tf2_mapreduce.state.count_table import COMMITTED_IN_PART
from tf2_mapreduce.storage import OUTAGE_MARK

__all__ = [
    "FILE_ERRORS",
    "FileFailure",
    "file_failure",
    "missing_op",
    "map_output",
    "tasks_named",
    "COMMITTED_IN_PART",
    "FailurePolicy",
    "Steps",
    "RETRY",
    "CLUSTER",
    "MISSING_OP",
    "MAP_OUTPUT_FAULT",
    "OUTPUT_FAULT",
    "output_failure",
    "OUTAGE",
    "STEPS",
]

# Errors that a map step raises because of one input file, not because of the cluster.
FILE_ERRORS = (
    tf.errors.NotFoundError,
    tf.errors.PermissionDeniedError,
    tf.errors.FailedPreconditionError,
    tf.errors.InvalidArgumentError,
    tf.errors.DataLossError,
    tf.errors.OutOfRangeError,
)

# A TFRecord file's byte range whose last record runs past the next range's start
# (native/record_dataset.cc): that start was not a record's, so the file's other ranges may
# hold a payload's bytes read as records. Skipping the one range would count them: the
# job fails whatever on_error says.
_RECORDS_MISALIGNED = "records do not line up at "
# A file read by byte range that changed size: the native op's words (native/read_range.cc),
# or FixedLengthRecordDataset's where the native op could not be built.
_RANGE_CHANGED_LINE = re.compile(r'input file "(.*)" (?:changed size: |has body length)')
# TF's file-system errors: "<path>; <strerror>".
_READ_ERROR_LINE = re.compile(r"^(.*); ([^;]*)$")
# gRPC's relay of an error, naming the task it came from.
_TARGET = re.compile(r"remote target /job:(ps|worker)/replica:\d+/task:(\d+)")
# A task whose binary lacks an op that the step uses: a scheduled function's words, and
# an eager op's (`native.missing_on`). Both are NotFoundErrors, which are otherwise an
# input's fault (a file deleted since it was listed).
_MISSING_OP = re.compile(
    r"Op type not registered '(\w+)' in binary|'(\w+)' is neither a type of a primitive operation nor a name of a function"
)


@dataclass(frozen=True)
class FileFailure:
    """An input a map step failed on: its path (None if TF's message does not say) and why."""

    path: str | None
    why: str


def file_failure(cause: str, not_found: bool = False) -> FileFailure:
    """The input a failed step's one-line cause (`errors.op_error_cause`) is about.
    `not_found`: the error was a NotFoundError (the input was there when listed)."""
    resized = _RANGE_CHANGED_LINE.search(cause)
    if resized:
        return FileFailure(resized.group(1), "changed size since it was listed")
    read_error = _READ_ERROR_LINE.match(cause)
    if not read_error:
        return FileFailure(None, cause)
    path, why = read_error.groups()
    why = why[:1].lower() + why[1:]
    if not_found:
        why += " (it was there when the inputs were listed)"
    return FileFailure(path, why)


def missing_op(message: str):
    """The op a task could not run because its process does not have it (a worker
    started without tf2_mapreduce's native ops), or None."""
    found = _MISSING_OP.search(message)
    return (found.group(1) or found.group(2)) if found else None


def map_output(message: str):
    """What a reducer's check of a map output said, where it failed in the graph
    (`reducers.base.assert_in_graph`: "assertion failed: [<marker><text>]"), or None."""
    at = message.find(MAP_OUTPUT)
    if at < 0:
        return None
    text = message[at + len(MAP_OUTPUT) :].split("\n", 1)[0].rstrip()
    text = text[:-1] if text.endswith("]") else text
    # TensorFlow's assertion writes its strings C-escaped ("Sum(unit=\\'lines\\')").
    return codecs.escape_decode(text.encode("utf-8"))[0].decode("utf-8", "replace")


# The path may hold spaces; the native op follows it with ": " (native/write_records.cc).
_CANNOT_WRITE_LINE = re.compile(re.escape(CANNOT_WRITE) + r"(.+?): (.*)")


def output_failure(message: str):
    """The `OutputError` of a map step that could not write the job's output
    (native/write_records.cc: "<marker><path>: <why>"), or None."""
    found = _CANNOT_WRITE_LINE.search(message)
    return OutputError(found.group(1), found.group(2).split("\n", 1)[0].strip()) if found else None


def tasks_named(message: str, role: str = "ps") -> list:
    """The indices of the tasks of `role` a TF error message says it was relayed from."""
    return [int(index) for kind, index in _TARGET.findall(message) if kind == role]


def _message(error):
    return error.message if isinstance(error, tf.errors.OpError) else str(error)


# What a failed round is, for the run (`FailurePolicy.round`).
RETRY = "retry"  # workers could not reach a ps that is fine: wait a little, run the round again
CLUSTER = "cluster"  # a ps failed, or the cluster failed otherwise: stop (a checkpoint, how to resume)
MISSING_OP = "missing op"  # a worker cannot run the map step's ops: stop, naming it
MAP_OUTPUT_FAULT = "map output"  # the job's map_fn returned what its reducer cannot take: fail the job
OUTPUT_FAULT = "output"  # a step could not write the job's output (not an outage): fail the job, no input's fault
OUTAGE = "outage"  # a step could not reach its input's storage: wait, run the round again; never a skip
STEPS = "steps"  # inputs' faults: see each failed step (`FailurePolicy.steps`)


@dataclass
class Steps:
    """What to do about the steps of a round that failed on inputs: run the pieces of each
    of `regroup` in parts, leave out the pieces of `skip` (id -> why), fail with `fail`,
    stop for `cluster`, a step's error that is not an input's (the run says what it means),
    or wait out `outage`, a step's storage that could not be reached (its pieces run again)."""

    regroup: list = field(default_factory=list)
    skip: dict = field(default_factory=dict)
    fail: Exception | None = None
    cluster: Exception | None = None
    outage: Exception | None = None


class FailurePolicy:
    """What the run does after a round failed, with `on_error` ("fail" or "skip") for an
    input that cannot be read. Holds no state; every method is pure."""

    def __init__(self, on_error: str):
        self.on_error = on_error

    def round(self, error, ps_down: dict) -> str:
        """What the round's `error` (the one join() raised) is: `RETRY`, `CLUSTER`,
        `MISSING_OP`, `MAP_OUTPUT_FAULT`, `OUTPUT_FAULT`, `OUTAGE` or `STEPS`. `ps_down`: {ps index: why} of the ps tasks that do not
        accept connections (`ps_health.PsHealth.down`). A ps that an error names but that
        answers is no lost ps: workers name one whose restart their channel has not yet
        noticed, and the round is retried (`RETRY`, for connectivity errors)."""
        if ps_down:
            return CLUSTER
        if OUTAGE_MARK in _message(error):
            return OUTAGE
        if isinstance(error, MapOutputError) or map_output(_message(error)) is not None:
            return MAP_OUTPUT_FAULT
        if CANNOT_WRITE in _message(error):
            return OUTPUT_FAULT
        if missing_op(_message(error)):
            return MISSING_OP
        if COMMITTED_IN_PART in _message(error):
            return CLUSTER
        if isinstance(error, FILE_ERRORS):
            return STEPS
        return RETRY if isinstance(error, connectivity_errors()) else CLUSTER

    def map_output_error(self, error) -> MapOutputError:
        """The error that fails a job whose map_fn returned what its reducer cannot take:
        raised as it was where it was found at tracing, else said again from the graph's."""
        if isinstance(error, MapOutputError):
            return error
        return MapOutputError(map_output(_message(error)))

    def missing_op_error(self, error, workers: dict, hint: str) -> ClusterError:
        """The error that stops a job whose map step uses an op that a worker lacks;
        `workers`: index -> address; `hint`: how to resume."""
        message = _message(error)
        named = ["worker %d at %s" % (i, workers[i]) for i in tasks_named(message, "worker") if i in workers]
        return ClusterError(
            "%s cannot run the map step: its process does not have the op %s (tf2_mapreduce's native ops "
            "could not be built or loaded there, or TF2_MAPREDUCE_NATIVE=off). Restart it where they load, "
            "or start every task with TF2_MAPREDUCE_NATIVE=off%s"
            % (" and ".join(named) or "a worker", missing_op(message), hint)
        )

    def steps(self, error, step_failures, changed: dict, describe, path_of) -> Steps:
        """What to do about a round that failed with `error` on inputs (`STEPS`), from
        [(piece ids, error)] of each step that failed with an error of its own.
        `changed`: {piece: size now} of whole files a step found changed
        (`run_state.ChangedFiles`); `describe(piece)`: the piece as users know it;
        `path_of(piece)`: (its file's path, size listed)."""
        decision = Steps()
        if not step_failures:
            decision.fail = JobFailed("a map step failed: %s" % op_error_cause(error))
            return decision
        # A misaligned range first: the range after its false cut fails too, on what
        # looks like a corrupt record, and the misalignment is the one that says why.
        step_failures = sorted(step_failures, key=lambda failure: _RECORDS_MISALIGNED not in _message(failure[1]))
        for ids, error in step_failures:
            if OUTAGE_MARK in _message(error):
                decision.outage = error
                continue
            if map_output(_message(error)) is not None:
                decision.fail = self.map_output_error(error)
                return decision
            if output_failure(_message(error)) is not None:
                decision.fail = output_failure(_message(error))
                return decision
            if not isinstance(error, FILE_ERRORS) or missing_op(_message(error)):
                decision.cluster = error
                return decision
            if len(ids) > 1:
                decision.regroup.append(sorted(int(i) for i in ids))
                continue
            piece = int(ids[0])
            if piece in changed:
                path, size = path_of(piece)
                failure = FileFailure(
                    path, "changed since it was listed (%d bytes then, %d now)" % (size, changed[piece])
                )
            else:
                failure = file_failure(op_error_cause(error), not_found=isinstance(error, tf.errors.NotFoundError))
            where = describe(piece)
            misaligned = _RECORDS_MISALIGNED in failure.why
            if self.on_error == "fail" or misaligned:
                named = where if failure.path is None or where.startswith(failure.path) else failure.path
                hint = (
                    " (a payload holds what looks like records: the file cannot be cut there, nor skipped in part; "
                    "read it whole with {setting:read_size} above its size)"
                    if misaligned
                    else ""
                )
                decision.fail = JobFailed("a map step failed: %s: %s%s" % (named, failure.why, hint))
                return decision
            decision.skip[piece] = failure.why
        return decision
