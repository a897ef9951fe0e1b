"""Errors a job can stop with, each mapped to the exit status the CLIs use.

Every message is one line that names the path or task at fault and the cause,
so a user (or a cluster manager's log) sees what to fix without a traceback.
"""

__all__ = [
    "Error",
    "UsageError",
    "InputError",
    "ClusterError",
    "JobFailed",
    "EXIT_OK",
]

EXIT_OK = 0


class Error(Exception):
    """Base class; `exit_code` is the process status the CLIs exit with."""

    exit_code = 1


class JobFailed(Error):
    """The job started but could not finish (unreadable input, a task failed)."""

    exit_code = 1


class UsageError(Error):
    """Bad flags or a malformed TF_CONFIG; nothing was run."""

    exit_code = 2


class InputError(Error):
    """An input path is missing, unreadable or not a regular file; nothing was run."""

    exit_code = 2


class ClusterError(Error):
    """A task of the cluster did not answer, or died before the job could start."""

    exit_code = 3
