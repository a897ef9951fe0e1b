"""Errors a job can stop with, each mapped to the exit status the CLIs use.

Every message is one line that names the path or task at fault and the cause,
so a user (or a cluster manager's log) sees what to fix without a traceback.
"""

import os
import re
import traceback

__all__ = [
    "Error",
    "UsageError",
    "InputError",
    "ClusterError",
    "OutputError",
    "JobFailed",
    "MapOutputError",
    "MAP_OUTPUT",
    "CANNOT_WRITE",
    "Interrupted",
    "Cancelled",
    "setting",
    "SETTING",
    "op_error_cause",
    "cause_of",
    "first_line",
    "raised_by_user_code",
    "raised_here",
    "connectivity_errors",
]


# How a message names one of the job's settings: the CLI shows it as its flag
# (--read_size), Python as the keyword argument (read_size).
SETTING = re.compile(r"\{setting:(\w+)\}")


def setting(name):
    """A setting, as a message names it (see `Error.cli_message`)."""
    return "{setting:%s}" % name


class Error(Exception):
    """Base class; `exit_code` is the process status the CLIs exit with. A message
    names the settings involved with `setting()`: `str()` shows them as Python's
    keyword arguments, `cli_message()` as the CLI's flags."""

    exit_code = 1

    def __str__(self):
        return SETTING.sub(r"\1", super().__str__())

    def cli_message(self):
        return SETTING.sub(r"--\1", super().__str__())


class JobFailed(Error):
    """The job started but could not finish (unreadable input, a task failed)."""

    exit_code = 1


class MapOutputError(JobFailed):
    """A job's `map_fn` returned what its reducer cannot take: the job fails whatever
    `on_error` says, since no input is at fault. The message names the job, the reducer,
    what map_fn returned and what the reducer needs."""


# Starts the text of a map output check that fails in the graph (`reducers.base.assert_in_graph`),
# so that the run tells it from an input's fault (`run.failures`).
MAP_OUTPUT = "tf2_mapreduce: map output: "
# How a map step's native op says it could not write the job's output (native/write_records.cc):
# the job fails, with no input at fault.
CANNOT_WRITE = "tf2_mapreduce: cannot write output "


class UsageError(Error):
    """Bad flags or a malformed TF_CONFIG; nothing was run."""

    exit_code = 2


class InputError(Error):
    """An input path is missing, unreadable or not a regular file; nothing was run."""

    exit_code = 2

    def __init__(self, path, reason):
        super().__init__("%s: %s" % (path, reason))
        self.path = SETTING.sub(r"\1", path)
        self.reason = reason
        self._given_path = path

    def __reduce__(self):  # pickled as it was made (`listing` sends it between processes)
        return type(self), (self._given_path, self.reason)


class OutputError(Error):
    """The result cannot be written where it was asked for: `path`, and why (`reason`)."""

    exit_code = 1

    def __init__(self, path, reason):
        super().__init__("%s: %s" % (path, reason))
        self.path = path
        self.reason = reason


class ClusterError(Error):
    """The cluster cannot run the job: a task did not answer, or failed mid-job.

    `failed_tasks`: {(role, index): why} of the tasks at fault, where known;
    `checkpoint`: the checkpoint a rerun resumes from (None: it starts over);
    `files_done`: files done in that checkpoint."""

    exit_code = 3

    def __init__(self, message, failed_tasks=None, checkpoint=None, files_done=0):
        super().__init__(message)
        self.failed_tasks = dict(failed_tasks or {})
        self.checkpoint = checkpoint
        self.files_done = files_done


class Interrupted(Error):
    """SIGINT or SIGTERM; exits 128 + the signal number, as shells report it.
    `checkpoint`: the checkpoint saved on the way out, or None."""

    def __init__(self, signum, message, checkpoint=None):
        super().__init__(message)
        self.signum = signum
        self.exit_code = 128 + signum
        self.checkpoint = checkpoint


class Cancelled(Interrupted):
    """A job cancelled from Python (`JobHandle.cancel`); exits as SIGINT would."""

    def __init__(self, message, checkpoint=None):
        super().__init__(2, message, checkpoint)


# Lines of a TF error that are not its cause: the graph stack where the failing op
# was defined, and gRPC's account of how the error was relayed between tasks.
_BOILERPLATE = ("Graph execution error", "Detected at node", "Additional GRPC", ":UNKNOWN", "[[", "<stack traces")
_FIRST_ROOT_ERROR = re.compile(r"^\s*\(0\) [A-Z_]+:\s*(.*)$", re.M)  # in "2 root error(s) found."
_EAGER_OP = re.compile(r"\s*\[Op:\w+\]( name: \S*)?\s*$")  # how an eager op's error ends


def first_line(error):
    """The first line of any exception's message, or its type's name if it has none."""
    lines = str(error).splitlines()
    return lines[0] if lines else type(error).__name__


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Frames that are not a user's: this package's, TensorFlow's, Python's import machinery.
_NOT_USERS = (_PACKAGE, os.sep + "tensorflow" + os.sep, "<frozen ")


def raised_here(error) -> bool:
    """Whether `error` was raised in this package's own code (its innermost frame is ours)."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and frames[-1].filename.startswith(_PACKAGE)


def raised_by_user_code(error) -> str:
    """What a user's code (a module imported, a function traced) raised, in one line: the
    exception's type and first line, and the innermost line of the user's own files that
    raised it (a SyntaxError's message says where already)."""
    text = str(error).strip()
    said = type(error).__name__ + (": " + text.splitlines()[0] if text else "")
    if isinstance(error, SyntaxError):
        return said
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not any(n in f.filename for n in _NOT_USERS)]
    return said + (" (%s line %d)" % (frames[-1].filename, frames[-1].lineno) if frames else "")


def connectivity_errors():
    """TF's errors for a task that could not be reached, or for a call cancelled because
    another could not: they say nothing about the data, and a retry may succeed."""
    import tensorflow as tf  # here: the CLIs import this module before TensorFlow

    return (
        tf.errors.UnavailableError,
        tf.errors.CancelledError,
        tf.errors.AbortedError,
        tf.errors.DeadlineExceededError,
    )


def op_error_cause(error):
    """The one line of a tf.errors.OpError that says what went wrong, e.g.
    "/x/a.txt; No such file or directory" out of a page of graph and gRPC context."""
    first_root = _FIRST_ROOT_ERROR.search(error.message)
    if first_root:
        return first_root.group(1).strip()
    for line in error.message.splitlines():
        if line.strip() and not line[0].isspace() and not line.startswith(_BOILERPLATE):
            return _EAGER_OP.sub("", line.split("}} ", 1)[-1]).strip()
    return type(error).__name__


def cause_of(error):
    """A lower-case cause of any error met reading or writing a file: an OSError's
    ("no such file or directory", "permission denied"), a TensorFlow error's one line
    (`op_error_cause`), or the first line of anything else."""
    if isinstance(error, OSError):
        return (error.strerror or str(error)).lower()
    if hasattr(error, "message") and hasattr(error, "error_code"):  # a tf.errors.OpError
        return op_error_cause(error)
    return first_line(error)
