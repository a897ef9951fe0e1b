"""The Python API: a cluster to run jobs on (a context manager), a handle on a running
job, and the result a job returns, self-contained once read.

    import tf2_mapreduce as mr

    with mr.Cluster.local() as cluster:
        result = cluster.run(mr.jobs.BUILT_IN["wordfreq"], ["corpus/"])
        vocabulary = result.table(min_count=2)
"""

import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from tf2_mapreduce import cluster as cluster_lib
from tf2_mapreduce import quiet
from tf2_mapreduce.errors import ClusterError, Error, first_line

__all__ = ["Cluster", "JobHandle", "Result", "FileValue", "PerFile"]

CONNECT_TIMEOUT = 60.0  # seconds for every ps and worker to accept connections
SHUTDOWN_TIMEOUT = 30.0  # seconds to keep telling a task that does not answer that the job is over
LOCAL_EXIT_TIMEOUT = 10.0  # seconds local servers get to exit by themselves once told

_connected = []  # the one cluster this process is connected to (TensorFlow allows one)


@dataclass(frozen=True)
class FileValue:
    """One input file of a per-piece job: its path, size, and value (an int; a tuple
    for a vector sum; None for a min or max of a file whose pieces were all skipped)."""

    path: str
    size: int
    value: object


class PerFile(Sequence):
    """The `FileValue` of every file counted whole, in input order, each made when it is
    asked for: a job over a million files keeps an array of values here, not a
    million objects."""

    def __init__(self, files, values, done, to_python):
        self._files, self._values, self._to_python = files, values, to_python
        self._index = np.flatnonzero(done)

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[n] for n in range(*k.indices(len(self)))]
        index = self._index[k]
        f = self._files[index]
        return FileValue(f.path, f.size, self._to_python(self._values[index]))

    def __repr__(self) -> str:
        return "PerFile(%d files)" % len(self)


NO_FILES = PerFile([], np.zeros(0, np.int64), np.zeros(0, bool), None)


@dataclass
class Result:
    """What a job computed. Everything but a per-key table is read when the job ends
    and stays valid afterwards; a per-key table lives on the ps tasks and is read on
    demand (`top`, `entries`, `table`, `write`) while the cluster is open.

    Guarantee: every input is either counted exactly once or listed in `skipped` with
    its reason; nothing is dropped or counted twice.
    """

    job: str
    total: object  # an int, a tuple for a vector sum, None for a min/max over nothing
    distinct: int | None  # distinct keys of a per-key job, else None
    files_done: int
    bytes_done: int
    per_file: PerFile  # a FileValue per file counted whole, for per-piece jobs; empty for per-key jobs
    skipped: list  # (path, reason) of every input left out (on_error="skip"), listing and reading alike
    resumed_from: str | None  # the checkpoint the run resumed from
    files_resumed: int
    seconds: float  # the run, from its start to its result
    map_seconds: float  # from the first map step scheduled to the result (0 if none ran)
    steps_per_worker: tuple
    _run: object = field(default=None, repr=False)
    _raw: object = field(default=None, repr=False)
    _found: object = field(default=None, repr=False)

    def _table(self):
        if self._run is None or not self._raw.job.reducer.keyed:
            raise TypeError("job %s has no per-key table" % self.job)
        if self._run.released:
            raise ClusterError(
                "the table of job %s was freed on the ps tasks (its cluster was left, or the "
                "result released): read it while the cluster is open" % self.job
            )
        return self._raw.reducer

    def top(self, k: int, min_count: int = 1) -> list:
        """The `k` keys with the largest counts (ties by key bytes) as [(key bytes, count)].
        Blocking; reads only the keys at least as frequent as the k-th."""
        with self._run.reading_result():
            return self._table().top(k, min_count)

    def entries(self, min_count: int = 1) -> Iterator:
        """Yields every (key bytes, count) with count >= `min_count`, in no order, a chunk
        at a time: the caller never needs the whole table in memory."""
        with self._run.reading_result():
            yield from self._table().entries(min_count)

    def table(self, min_count: int = 1) -> dict:
        """The whole table as {key bytes: count}, in local memory: for tables that fit."""
        return dict(self.entries(min_count))

    def write(self, path: str, min_count: int = 1, since: float | None = None) -> None:
        """Writes the result as the CLI's --output does: JSON for per-piece jobs; for a
        per-key job the sorted table as TSV, or JSON if `path` ends in .json. Atomic.
        The JSON's timings are the run's, or with `since` (a `time.monotonic()` reading,
        such as when the process started) counted from then, start-up apart."""
        from tf2_mapreduce import output

        output.check_path(path, self._raw.job)
        timings = {"total": self.seconds if since is None else time.monotonic() - since}
        if since is not None and self.map_seconds:
            timings["startup"] = timings["total"] - self.map_seconds
        timings["map"] = self.map_seconds
        with self._run.reading_result():
            output.write(path, self._raw, self._found, min_count, timings)

    def write_vocabularies(
        self,
        output_dir: str | None,
        top_k: int | None = None,
        min_count: int = 1,
        file_format: str = "text",
        since: float | None = None,
    ) -> dict:
        """For a per-key job: writes its vocabularies under `output_dir` (one per feature
        for `jobs.vocab`, one of the keys otherwise), most frequent first, as
        `vocabulary.write` describes; None writes nothing. Returns the summary (also
        written as summary.json): per vocabulary its values, distinct terms, terms
        written and left out. Blocking; streams the table from the ps tasks."""
        from tf2_mapreduce import output, vocabulary

        table = self._table()
        timings = {"total": self.seconds if since is None else time.monotonic() - since, "map": self.map_seconds}
        document = output.header(self._raw, self._found, timings)
        with self._run.reading_result():
            return vocabulary.write(
                self._raw.job.reducer, table.entries(), output_dir, top_k, min_count, file_format, document
            )

    def release(self) -> None:
        """Frees the job's state on the ps tasks (done for every result when the cluster
        is left); the table cannot be read afterwards. Blocking."""
        self._run.release()


class JobHandle:
    """A job running in the background (`Cluster.submit`): non-blocking to query,
    `wait` blocks. One job runs on a cluster at a time."""

    def __init__(self, cluster, job, run, found, on_progress=None):
        self._cluster = cluster
        self._job = job
        self._run = run
        self._found = found
        self._progress = None
        self._on_progress = on_progress
        run.on_progress = self._report
        self._outcome = {}
        self._finished = threading.Event()
        self._thread = threading.Thread(target=self._main, name="tf2_mapreduce-job", daemon=True)
        self._thread.start()

    def _main(self):
        try:
            raw = self._run.run()
            self._outcome["result"] = self._cluster._result(self._run, raw, self._found)
        except BaseException as e:  # handed to wait()
            self._outcome["error"] = e
        finally:
            self._cluster._running = None
            self._finished.set()

    def _report(self, progress):
        self._progress = progress
        if self._on_progress:
            self._on_progress(progress)

    def progress(self):
        """The latest progress report (`runner.Progress`: files and bytes done, the value so
        far, seconds...), or None before the first. Non-blocking."""
        return self._progress

    def done(self) -> bool:
        """Whether the job has ended, with a result or an error. Non-blocking."""
        return self._finished.is_set()

    def cancel(self, signum: int | None = None) -> None:
        """Asks the job to stop: it saves a checkpoint (with a checkpoint directory) and
        `wait` then raises `Cancelled` (or `Interrupted`, for the signal `signum` that
        asked for it), saying how to resume. Non-blocking; safe in a signal handler."""
        self._run.request_stop(signum)

    def wait(self, timeout: float | None = None) -> Result:
        """Blocks until the job ends, at most `timeout` s; returns its `Result` or raises its
        error (`ClusterError`, `JobFailed`, `Cancelled`...). Raises `TimeoutError` if
        it has not ended by then; the job goes on."""
        if not self._finished.wait(timeout):
            raise TimeoutError("job %s still running after %gs" % (self._job.name, timeout))
        if "error" in self._outcome:
            raise self._outcome["error"]
        return self._outcome["result"]


def _within(seconds, connect):
    """`connect()`, or a `ClusterError` after `seconds`: TensorFlow can stall for minutes
    creating the strategy when a task dies mid-connect (docs/runtime.md), and offers no
    way to cancel, so the attempt is left behind in its thread."""
    outcome = {}

    def attempt():
        try:
            outcome["value"] = connect()
        except BaseException as e:  # handed to the caller
            outcome["error"] = e

    thread = threading.Thread(target=attempt, name="tf2_mapreduce-connect", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise ClusterError(
            "connecting to the cluster took over %gs; check that every task of the cluster is up" % seconds
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


class Cluster:
    """A TensorFlow parameter-server cluster this process drives as its chief; use as a
    context manager. Entering connects (blocking, at most `connect_timeout` s per
    step); leaving frees every result's state and tells the servers that the job is
    over (exactly as the CLI does), unless `keep_serving`.

    TensorFlow lets a process connect to one cluster in its life: open one, and run
    as many jobs on it as you like, one after another.
    """

    def __init__(
        self,
        cluster,
        local=None,
        in_process=False,
        keep_serving=False,
        connect_timeout=CONNECT_TIMEOUT,
        shutdown_timeout=SHUTDOWN_TIMEOUT,
        log=None,
        on_shutdown_retry=None,
        on_shutdown_failure=None,
        verbose=False,
    ):
        self.cluster = cluster  # cluster.Cluster: addresses per role
        self._local = local  # cluster.LocalCluster of child processes, or None
        self._in_process = in_process
        self._servers = []
        self.keep_serving = keep_serving
        self.connect_timeout = connect_timeout
        self.shutdown_timeout = shutdown_timeout
        self.log = log or (lambda line: None)
        self.verbose = verbose  # show TensorFlow's native start-up lines
        self.on_shutdown_retry = on_shutdown_retry or (
            lambda role, index, address, why: self.log(
                "could not tell %s %d at %s that the job is over yet (%s); trying for up to %gs"
                % (role, index, address, why, self.shutdown_timeout)
            )
        )
        self.on_shutdown_failure = on_shutdown_failure or (
            lambda role, index, why: self.log(
                "warning: could not tell %s %d that the job is over: %s" % (role, index, why)
            )
        )
        self._coordinator = None
        self._heartbeats = None
        self._coordinator_id = None
        self._runs = []
        self._running = None

    @classmethod
    def local(cls, num_ps: int = 1, num_workers: int = 2, processes: bool = False, **options) -> "Cluster":
        """A cluster on this machine: servers inside this process (fast to start), or
        `processes`, one child process per task as on a real cluster. Its ports listen
        on every interface while it runs (TensorFlow's servers cannot do otherwise);
        the CLI's default puts it in a private network namespace instead."""
        if processes:
            local = cluster_lib.LocalCluster(num_ps, num_workers)
            return cls(local.cluster, local=local, **options)
        return cls(cluster_lib.local_cluster(num_ps, num_workers), in_process=True, **options)

    @classmethod
    def from_tf_config(cls, tf_config: str | None = None, **options) -> "Cluster":
        """The cluster `tf_config` (JSON; default: the TF_CONFIG environment variable)
        describes, this process being its chief."""
        text = tf_config if tf_config is not None else os.environ.get("TF_CONFIG")
        if not text:
            raise ClusterError("TF_CONFIG is not set: it must describe the cluster, with this process as its chief")
        return cls(cluster_lib.from_tf_config(text, expect_roles=("chief",)), **options)

    @classmethod
    def from_resolver(cls, resolver, **options) -> "Cluster":
        """The cluster a TensorFlow `ClusterResolver` describes (Slurm, Kubernetes, TPU VMs,
        `SimpleClusterResolver`...), this process being its chief."""
        jobs = {role: list(addresses) for role, addresses in resolver.cluster_spec().as_dict().items()}
        return cls(cluster_lib.validated(jobs, "chief", 0, ("chief",), type(resolver).__name__), **options)

    @property
    def local_processes(self) -> bool:
        """Whether this cluster's servers are child processes of this one."""
        return self._local is not None

    def start(self) -> "Cluster":
        """Starts this cluster's local servers, if it has any (other clusters' servers are
        started by whoever runs them); idempotent. Child processes boot meanwhile: returns
        at once for them, after TensorFlow's import for servers in this process."""
        if self._local and not self._local.processes:
            self._local.start()
        if self._in_process and not self._servers:
            quiet.import_tensorflow(self.verbose)
            self._servers = cluster_lib.start_in_process(self.cluster)
        return self

    def connect(self) -> "Cluster":
        """Connects this process to the cluster as its chief; blocking: waits for every
        ps and worker to accept connections, then connects, each for at most
        `connect_timeout` s. Raises `ClusterError` naming what did not answer."""
        if self._coordinator is not None:
            return self
        if _connected:
            raise ClusterError(
                "this process is already connected to a cluster (TensorFlow allows one per "
                "process): run the next jobs on it"
            )
        from tf2_mapreduce import runner, server_channel

        self.start()
        tf = quiet.import_tensorflow(self.verbose)
        if not self._in_process:
            check = self._local.check_alive if self._local else None
            cluster_lib.wait_for_tasks(self.cluster, self.connect_timeout, check=check)
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(self.cluster.jobs), task_type="chief", task_id=0, rpc_layer="grpc"
        )
        self._coordinator = _within(self.connect_timeout, lambda: runner.connect(resolver, self.cluster.devices()))
        _connected.append(self)
        self._coordinator_id = server_channel.new_coordinator_id()
        if not self._in_process:
            self._heartbeats = server_channel.Heartbeats(self.cluster, self._coordinator_id).__enter__()
        return self

    def close(self, error: BaseException | None = None) -> None:
        """Frees every job's state on the ps tasks (best effort) and, unless `keep_serving`
        or `error` is a `ClusterError` (the servers then wait for the rerun), tells the
        servers that the job is over: a task that does not answer is tried again for
        `shutdown_timeout` s. Local servers are then reaped. Blocking."""
        from tf2_mapreduce import server_channel

        if self._heartbeats:
            self._heartbeats.__exit__(None, None, None)
            self._heartbeats = None
        # Servers that outlive this process (or live in it) would hold every job's state.
        keep = self.keep_serving or self._in_process
        for run in self._runs if keep and not isinstance(error, ClusterError) else []:
            if not run.released:
                try:
                    run.release()
                except Exception as e:  # noqa: BLE001 - best effort; the servers may be gone
                    self.log("warning: could not free a job's state on the ps tasks: %s" % first_line(e))
        told = self._coordinator_id is not None and not self._in_process
        if told and not isinstance(error, ClusterError) and (self._local or not self.keep_serving):
            # Local children cannot come back once gone: one attempt each.
            failed = server_channel.request_exit(
                self.cluster,
                self._coordinator_id,
                within=0 if self._local else self.shutdown_timeout,
                on_retry=self.on_shutdown_retry,
            )
            for (role, index), why in sorted(failed.items()):
                self.on_shutdown_failure(role, index, why)
            if self._local:
                self._await_local_exit()
        if self._local:
            self._local.close()

    def _await_local_exit(self):
        """Gives local servers that were told the job is over a moment to exit by themselves."""
        for (role, index), code in sorted(self._local.wait(timeout=LOCAL_EXIT_TIMEOUT).items()):
            if code != 0:
                self.log(
                    "warning: local %s %d %s: %s"
                    % (
                        role,
                        index,
                        "did not exit" if code is None else "exited with status %d" % code,
                        self._local.log_tail(role, index),
                    )
                )

    def __enter__(self) -> "Cluster":
        try:
            return self.start().connect()
        except BaseException:
            if self._local:
                self._local.close()
            raise

    def __exit__(self, kind, error, traceback) -> None:
        self.close(error)

    def submit(
        self,
        job,
        inputs,
        *,
        on_error: str = "fail",
        checkpoint_dir: str | None = None,
        on_progress=None,
        **options,
    ) -> JobHandle:
        """Starts `job` (a `jobs.Job`) over `inputs` (files, directories, globs, @lists; any
        tf.io.gfile path; or an `inputs.Inputs` already listed) and returns at once;
        inputs are listed first (blocking).
        `options` are `runner.Options` fields (`checkpoint_every`, `read_size`...).
        Exactly-once: see `Result`. Raises `InputError` for inputs that cannot be used."""
        from tf2_mapreduce import inputs as inputs_lib
        from tf2_mapreduce import runner

        if self._coordinator is None:
            raise ClusterError("the cluster is not open: use it as a context manager (with Cluster...)")
        if self._running is not None:
            raise Error("job %s is still running on this cluster: wait for it first" % self._running)
        if self._runs and not self._runs[-1].drained(runner.DRAIN_TIMEOUT):
            raise ClusterError(
                "the map steps of the stopped job before are still running after %gs (a worker hangs?)"
                % runner.DRAIN_TIMEOUT
            )
        found = inputs if isinstance(inputs, inputs_lib.Inputs) else inputs_lib.expand(list(inputs), on_error=on_error)
        run_options = runner.Options(on_error=on_error, checkpoint_dir=checkpoint_dir, **options)
        run = runner.JobRun(
            job, found.files, self._coordinator, self.cluster, run_options, heartbeats=self._heartbeats, log=self.log
        )
        self._runs.append(run)
        self._running = job.name
        return JobHandle(self, job, run, found, on_progress)

    def run(self, job, inputs: Sequence[str], **options) -> Result:
        """Runs `job` over `inputs` to its end; blocking. See `submit` for the arguments."""
        return self.submit(job, inputs, **options).wait()

    def _result(self, run, raw, found) -> Result:
        reducer = raw.job.reducer
        per_file = NO_FILES
        with run.reading_result():
            if not reducer.keyed:
                per_file = PerFile(raw.files, raw.file_values(), raw.file_done, reducer.to_python)
        map_seconds = raw.finished - raw.first_schedule if raw.first_schedule else 0.0
        return Result(
            job=raw.job.name,
            total=raw.total,
            distinct=raw.stats.distinct,
            files_done=raw.files_done,
            bytes_done=raw.total_bytes,
            per_file=per_file,
            skipped=list(found.skipped) + list(raw.skipped),
            resumed_from=raw.resumed_from,
            files_resumed=raw.files_resumed,
            seconds=raw.seconds,
            map_seconds=map_seconds,
            steps_per_worker=raw.steps_per_worker,
            _run=run,
            _raw=raw,
            _found=found,
        )
