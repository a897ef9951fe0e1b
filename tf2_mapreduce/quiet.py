"""Imports TensorFlow without the native start-up lines every CPU-only run prints
(oneDNN, CUDA drivers, absl log set-up); any other line it writes still reaches stderr.
And hides the log records TensorFlow writes of a failed map step, which the run reports.
"""

import logging
import os
import re
import sys
import threading

__all__ = ["is_startup_noise", "import_tensorflow", "is_closure_error", "hide_closure_errors"]

# Lines TensorFlow's C++ writes to stderr while it loads and finds its devices, before
# (and regardless of) TF_CPP_MIN_LOG_LEVEL: two shared libraries each print the first
# three, and a machine without a GPU gets the cuInit "error". None says anything about
# a job. Kept to exact messages so that a real error at start-up is never hidden.
_NOISE = [
    re.compile(r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$"),
    re.compile(r"^I\d{4} [\d:.]+ +\d+ port\.cc:\d+\] oneDNN custom operations are on\. "),
    re.compile(r"^I\d{4} [\d:.]+ +\d+ cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine"),
    re.compile(r"^E\d{4} [\d:.]+ +\d+ cuda_platform\.cc:\d+\] failed call to cuInit: "),
    re.compile(r"^E\d{4} [\d:.]+ +\d+ cuda_executor\.cc:\d+\] failed call to cuInit: "),
    re.compile(r"^I\d{4} [\d:.]+ +\d+ cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized to use "),
    re.compile(r"^To enable the following instructions: .*, in other operations, rebuild TensorFlow with "),
]

_imported = None

# What ClusterCoordinator logs (at ERROR, with the remote traceback) when a scheduled
# function fails, and when it then cancels the others.
_CLOSURE_ERRORS = ("encountered the following error when processing closure", "Start cancelling closures due to error")


def is_startup_noise(line: str) -> bool:
    """Whether `line` (without its newline) is one of TensorFlow's start-up lines."""
    return any(pattern.search(line) for pattern in _NOISE)


def is_closure_error(pathname: str, message: str) -> bool:
    """Whether a log record (its source file, its message) is ClusterCoordinator's of a
    failed map step. Pure: TensorFlow's own wording, matched here only."""
    return os.path.basename(pathname) == "cluster_coordinator.py" and any(text in message for text in _CLOSURE_ERRORS)


class _ClosureErrors(logging.Filter):
    def filter(self, record):
        return not is_closure_error(record.pathname, record.getMessage())


def hide_closure_errors() -> None:
    """Drops TensorFlow's log records of a failed map step (tens of lines each, a remote
    traceback): the run classifies every failure itself and says what it means in one
    line (`failures`), which they would bury. For the CLI; idempotent."""
    tf_logger = logging.getLogger("tensorflow")
    if not any(isinstance(f, _ClosureErrors) for f in tf_logger.filters):
        tf_logger.addFilter(_ClosureErrors())


def _forward(read_fd, out_fd):
    with os.fdopen(read_fd, "rb") as lines:
        for raw in lines:
            if not is_startup_noise(raw.decode(errors="replace").rstrip("\n")):
                os.write(out_fd, raw)


def import_tensorflow(verbose: bool = False):
    """Returns the `tensorflow` module, imported and its devices found with the
    start-up lines filtered out of stderr (all shown if `verbose`). Blocking; the
    first call in a process does the work, later ones return the module at once.

    stderr (fd 2) goes through a pipe meanwhile, and every other line is copied to
    it as it comes, so nothing is lost if the import dies.
    """
    global _imported
    if _imported is not None:
        return _imported
    if verbose:
        import tensorflow as tf

        _imported = tf
        return tf
    sys.stderr.flush()
    saved = os.dup(2)
    read_fd, write_fd = os.pipe()
    forwarder = threading.Thread(target=_forward, args=(read_fd, saved), daemon=True)
    forwarder.start()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        import tensorflow as tf

        tf.config.list_physical_devices()  # where the cuInit line comes from
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the forwarder sees its end
        forwarder.join()
        os.close(saved)
    _imported = tf
    return tf
