"""Runs a job on a cluster: schedules its map steps with ClusterCoordinator, reports
progress while they run, and returns the exact result read back from the ps tasks.
The runner knows nothing of flags or printing; `coordinator.py` is the CLI around it.
"""

import math
import threading
import time
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from tf2_mapreduce import inputs as inputs_lib
from tf2_mapreduce.errors import ClusterError, JobFailed
from tf2_mapreduce.reduce import PerFileSum

__all__ = ["Progress", "Result", "connect", "run", "files_per_step"]

# ClusterCoordinator costs ~0.5 ms a closure (design.md); more closures than this
# per worker buys no balance, fewer leaves a worker idle at the end.
STEPS_PER_WORKER = 4
MAX_FILES_PER_STEP = 64


@dataclass(frozen=True)
class Progress:
    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int
    value: int  # the sum so far (words, for wordcount)
    seconds: float  # since the first map step was scheduled


@dataclass(frozen=True)
class Result:
    files: list  # of inputs.InputFile
    values: np.ndarray  # one per file, in `files` order
    seconds: float  # from the first schedule to the result

    @property
    def total(self):
        return int(self.values.sum())

    @property
    def total_bytes(self):
        return sum(f.size for f in self.files)


def connect(cluster_resolver, task_devices):
    """Connects this process, as chief, to the cluster; returns a ClusterCoordinator.

    Blocking. Strategy creation is lazy, so one tiny op then runs on each of
    `task_devices`, to surface a broken connection here rather than mid-job. Does
    not wait for tasks to come up; callers check first (`cluster.wait_for_tasks`).
    """
    chief = cluster_resolver.cluster_spec().task_address("chief", 0)
    try:
        strategy = tf.distribute.experimental.ParameterServerStrategy(cluster_resolver)
    except tf.errors.OpError as e:
        # TF's only word for a chief port that is taken is "Could not start gRPC server".
        raise ClusterError("the coordinator cannot serve as chief on %s: %s (is the port in use?)"
                           % (chief, _one_line(e))) from None
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    for device in task_devices:
        try:
            with tf.device(device):
                tf.zeros([]).numpy()
        except tf.errors.OpError as e:
            raise ClusterError("%s does not answer: %s" % (device, _one_line(e))) from None
    return coordinator


def files_per_step(num_files, num_workers):
    """Files per map step: a few steps per worker, at most `MAX_FILES_PER_STEP`."""
    return max(1, min(MAX_FILES_PER_STEP, math.ceil(num_files / (STEPS_PER_WORKER * num_workers))))


def _map_step(job, reducer):
    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.string)]
    )
    def map_step(ids, paths):
        values = tf.map_fn(
            lambda path: job.map_fn(tf.io.read_file(path)), paths, fn_output_signature=tf.int64
        )
        reducer.commit(ids, values)

    return map_step


# Lines of a TF error raised through join() that are not its cause: the graph
# stack where the failing op was defined, and gRPC's account of the relay.
BOILERPLATE = ("Graph execution error", "Detected at node", "Additional GRPC", ":UNKNOWN", "[[", "<stack traces")


def _one_line(error):
    """The cause of a TF error from a map step, such as "/x/a.txt; No such file or directory"."""
    for line in error.message.splitlines():
        if line.strip() and not line[0].isspace() and not line.startswith(BOILERPLATE):
            return line.split("}} ", 1)[-1].strip()
    return type(error).__name__


def run(job, files, coordinator, num_workers, ps_devices, step_files=0, on_progress=None, progress_every=2.0):
    """Runs `job` over `files` (a list of `inputs.InputFile`); blocking.

    Every file's value is committed exactly once (see `PerFileSum`) even though
    map steps are executed at least once. `on_progress(Progress)` is called every
    `progress_every` seconds from this thread, and once more at the end. Raises `JobFailed` if a map step
    fails for good (an input unreadable at read time, for instance); pending
    steps are then cancelled by ClusterCoordinator.
    """
    reducer = PerFileSum([f.size for f in files], ps_devices)
    step = _map_step(job, reducer)
    dataset = inputs_lib.batches(files, step_files or files_per_step(len(files), num_workers))
    total_bytes = sum(f.size for f in files)
    failure = []
    finished = threading.Event()

    def drive():
        try:
            for ids, paths in dataset:
                coordinator.schedule(step, args=(ids, paths))
            coordinator.join()
        except Exception as e:  # handed to the main thread, which raises it
            failure.append(e)
        finally:
            finished.set()

    def report():
        if on_progress:
            files_done, bytes_done, value = reducer.stats()
            on_progress(Progress(files_done, len(files), bytes_done, total_bytes, value, time.monotonic() - start))

    start = time.monotonic()
    threading.Thread(target=drive, name="tf2_mapreduce-schedule", daemon=True).start()
    while not finished.wait(progress_every):
        report()
    if failure:
        error = failure[0]
        if isinstance(error, tf.errors.NotFoundError):
            raise JobFailed("a map step failed: %s (it existed when the job started)" % _one_line(error)) from error
        if isinstance(error, tf.errors.OpError):
            raise JobFailed("a map step failed: %s" % _one_line(error)) from error
        raise error
    report()
    values = reducer.values()
    missing = np.flatnonzero(values < 0)
    if missing.size:
        # join() returned, so every step ran; a file without a value would be lost silently.
        raise JobFailed("%d file(s) were never committed, first %s" % (missing.size, files[missing[0]].path))
    return Result(files, values, time.monotonic() - start)
