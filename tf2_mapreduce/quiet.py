"""TensorFlow without its noise: its C++ log lines below ERROR kept off stderr where the
user has not set `TF_CPP_MIN_LOG_LEVEL`, the lines every CPU-only import prints filtered
out, the log records of a failed map step, which the run reports, and of TensorFlow's own
checkpoint saver tracing again hidden, and a lost worker's cut to one line."""

import contextlib
import importlib.abc
import importlib.util
import logging
import os
import re
import sys
import threading

__all__ = [
    "before_tensorflow",
    "show_tensorflow_logs",
    "is_startup_noise",
    "is_log_line",
    "import_tensorflow",
    "filtered_stderr",
    "is_hidden_record",
    "cut_record",
    "hide_runtime_records",
]

LEVEL = "TF_CPP_MIN_LOG_LEVEL"  # TensorFlow reads it once, when it is imported

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
# A line of TensorFlow's C++ log (absl's format): severity, date, time, thread, source.
_LOG_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] ")

_imported = None
_set_here = False  # whether LEVEL is this package's default, not the user's

# Records of TensorFlow's Python logger that the run says better itself, or that say
# nothing of the job, by the source file that logs them. ClusterCoordinator's (at ERROR,
# with the remote traceback): a scheduled function failed, then the others are cancelled,
# one of those is, a ps could not be reached (tried again; a ps lost fails the run, which
# says so: `run.failures`). The checkpoint saver traces its save
# function again at every save of a state spread over several tasks, by design, and says so
# from the fifth on.
_HIDDEN = {
    "cluster_coordinator.py": (
        re.compile("encountered the following error when processing closure"),
        re.compile("Start cancelling closures due to error"),
        re.compile("This derived error is ignored and not reported to users"),
        re.compile("It is treated as a transient connectivity failure for now"),
    ),
    "polymorphic_function.py": (
        re.compile(r"calls to <function MultiDeviceSaver\.save\.<locals>\.tf_function_save at \w+> triggered"),
    ),
}
# Records cut to their first line, the gRPC detail under it dropped: ClusterCoordinator's
# of a worker lost ("Worker /job:worker/replica:0/task:0 failed with UnavailableError():
# Socket closed"; its functions run again elsewhere). The run says which worker, and its
# address, once it has not answered for a few seconds (`run.stall.StallWatch.say_changes`):
# a loss shorter than that, or at a run's end, has this line alone.
_CUT = {
    "cluster_coordinator.py": (re.compile(r"^Worker /job:worker/replica:\d+/task:\d+ failed with "),),
}


def is_startup_noise(line: str) -> bool:
    """Whether `line` (without its newline) is one of TensorFlow's start-up lines."""
    return any(pattern.search(line) for pattern in _NOISE)


def is_log_line(line: str) -> bool:
    """Whether `line` is one of TensorFlow's C++ log lines (any severity), or RE2's, which
    TensorFlow's regex ops log to stderr when a pattern does not compile."""
    return bool(_LOG_LINE.match(line)) or "re2/re2.cc:" in line


def is_hidden_record(pathname: str, message: str) -> bool:
    """Whether a log record (its source file, its message) is one of TensorFlow's that the
    run says better itself or that says nothing of the job (`_HIDDEN`). Pure: TensorFlow's
    own wording, matched here only."""
    return any(pattern.search(message) for pattern in _HIDDEN.get(os.path.basename(pathname), ()))


def cut_record(pathname: str, message: str) -> str | None:
    """The first line of a log record to cut (`_CUT`), or None. Pure."""
    if any(pattern.search(message) for pattern in _CUT.get(os.path.basename(pathname), ())):
        return message.splitlines()[0]
    return None


class _Hidden(logging.Filter):
    def filter(self, record):
        source = os.path.basename(record.pathname)
        if source not in _HIDDEN and source not in _CUT:
            return True
        try:  # raised here, an error would reach TensorFlow's code: a handler only prints it
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - the record is shown as the handler shows it
            return True
        if is_hidden_record(record.pathname, message):
            return False
        first = cut_record(record.pathname, message)
        if first is not None:
            record.msg, record.args = first, None
        return True


def hide_runtime_records() -> None:
    """Drops TensorFlow's log records of a failed map step or a ps not reached (tens of
    lines each, a remote traceback), and of its checkpoint saver tracing again, and cuts
    its record of a worker lost to one line: the run
    classifies every failure itself and says what it means in one line (`run.failures`,
    `run.stall`), which they would bury. Idempotent."""
    tf_logger = logging.getLogger("tensorflow")
    if not any(isinstance(f, _Hidden) for f in tf_logger.filters):
        tf_logger.addFilter(_Hidden())


def _forward(read_fd, out_fd, keep):
    with os.fdopen(read_fd, "rb") as lines:
        for raw in lines:
            if keep(raw.decode(errors="replace").rstrip("\n")):
                os.write(out_fd, raw)


@contextlib.contextmanager
def filtered_stderr(drop):
    """While inside, every line written to stderr (fd 2) for which `drop(line)` is true is
    dropped, the others copied as they come, so nothing else is lost if the block dies.
    For TensorFlow's C++, which writes to fd 2 itself."""
    sys.stderr.flush()
    saved = os.dup(2)
    read_fd, write_fd = os.pipe()
    forwarder = threading.Thread(target=_forward, args=(read_fd, saved, lambda line: not drop(line)), daemon=True)
    forwarder.start()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the forwarder sees its end
        forwarder.join()
        os.close(saved)


def import_tensorflow(verbose: bool = False):
    """Returns the `tensorflow` module, imported and its devices found with the
    start-up lines filtered out of stderr (all its lines shown if `verbose`, as by
    `show_tensorflow_logs`). Blocking; the first call in a process does the work, later
    ones return the module at once."""
    global _imported
    if _imported is not None:
        return _imported
    if verbose:
        show_tensorflow_logs()
    if verbose or "tensorflow" in sys.modules:
        import tensorflow as tf
    else:
        with filtered_stderr(is_startup_noise):
            import tensorflow as tf

            tf.config.list_physical_devices()  # where the cuInit line comes from
    _imported = tf
    return tf


class _QuietImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports TensorFlow, whoever asks for it first, as `import_tensorflow` does."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        at = sys.meta_path.index(self)
        del sys.meta_path[at]  # the real finder's spec, not this one's again
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(at, self)
        if spec is None or spec.loader is None:
            return spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # imported: the hook's work is done
        with filtered_stderr(is_startup_noise):
            self._loader.exec_module(module)
            module.config.list_physical_devices()


def before_tensorflow() -> None:
    """Called when the package is imported: if TensorFlow is not imported yet, keeps its
    C++ log lines below ERROR off stderr (TF_CPP_MIN_LOG_LEVEL=2, unless the user set
    it) and its start-up lines out (whoever imports it first). Idempotent."""
    global _set_here
    if "tensorflow" in sys.modules or LEVEL in os.environ:
        return
    os.environ[LEVEL] = "2"
    _set_here = True
    sys.meta_path.insert(0, _QuietImport())


def show_tensorflow_logs() -> None:
    """Undoes `before_tensorflow` where TensorFlow is not imported yet: its log lines all
    reach stderr (the CLI's --verbosity)."""
    global _set_here
    if _set_here and "tensorflow" not in sys.modules:
        del os.environ[LEVEL]
        _set_here = False
        sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, _QuietImport)]
