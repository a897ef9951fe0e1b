"""What a failed map step means, read from TensorFlow's errors: which errors are an
input's fault, which input and why, which ps a message names. Pure functions over TF's
message text, each tested on messages TensorFlow produced (tests/test_failure_text.py).
"""

import re
from dataclasses import dataclass

import tensorflow as tf

__all__ = ["FILE_ERRORS", "FileFailure", "file_failure", "ps_tasks_named"]

# Errors that a map step raises because of one input file, not because of the cluster.
FILE_ERRORS = (
    tf.errors.NotFoundError,
    tf.errors.PermissionDeniedError,
    tf.errors.FailedPreconditionError,
    tf.errors.InvalidArgumentError,
    tf.errors.DataLossError,
    tf.errors.OutOfRangeError,
)

# A file read by byte range that changed size: the native op's words (native/read_range.cc),
# or FixedLengthRecordDataset's where the native op could not be built.
_RANGE_CHANGED_LINE = re.compile(r'input file "(.*)" (?:changed size: |has body length)')
# TF's file-system errors: "<path>; <strerror>".
_READ_ERROR_LINE = re.compile(r"^(.*); ([^;]*)$")
# gRPC's relay of an error, naming the task it came from.
_PS_TARGET = re.compile(r"remote target /job:ps/replica:\d+/task:(\d+)")


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


def ps_tasks_named(message: str) -> list:
    """The indices of the ps tasks a TF error message says it was relayed from."""
    return [int(index) for index in _PS_TARGET.findall(message)]
