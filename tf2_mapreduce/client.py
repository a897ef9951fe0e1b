"""The Python API's front: a cluster to run jobs on (a context manager that connects this
process as its chief) and a handle on a job running there.

    import tf2_mapreduce as mr

    with mr.Cluster.local() as cluster:
        result = cluster.run(mr.WordFreq(), ["corpus/"])
        vocabulary = result.table(min_count=2)
"""

import os
import threading
from collections.abc import Callable, Sequence

from tf2_mapreduce import log, quiet, storage
from tf2_mapreduce.cluster import chief
from tf2_mapreduce.cluster import local as local_cluster
from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import ClusterError, Error, first_line
from tf2_mapreduce.outputs.result import Result
from tf2_mapreduce.run.options import ClusterSettings, Options

__all__ = ["Cluster", "JobHandle"]


_connected = []  # the one cluster this process is connected to (TensorFlow allows one)


class JobHandle:
    """A job running in the background (`Cluster.submit`): non-blocking to query and
    cancel, `wait` blocks. One job runs on a cluster at a time."""

    def __init__(self, name: str, on_progress: Callable | None, cluster: "Cluster"):
        self.name = name
        self._on_progress = on_progress
        self._cluster = cluster
        self._progress = None
        self._run = None
        self._outcome = {}
        self._finished = threading.Event()

    def _start(self, run):
        self._run = run
        threading.Thread(target=self._main, name="tf2_mapreduce-job", daemon=True).start()

    def _main(self):
        try:
            self._outcome["result"] = self._run.run()
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
        """The latest progress report (`Progress`: files and bytes done, the value so far,
        seconds...), or None before the first. Non-blocking."""
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
        it has not ended by then; the job goes on. Signal handlers run while it waits."""
        if not chief.wait_awake(self._finished.is_set, self._finished.wait, timeout):
            raise TimeoutError("job %s still running after %gs" % (self.name, timeout))
        if "error" in self._outcome:
            raise self._outcome["error"]
        return self._outcome["result"]


def _release(runs):
    """Frees the state of every run of `runs` still on the ps tasks; best effort."""
    for run in runs:
        if not run.released:
            try:
                run.release()
            except Exception as e:  # noqa: BLE001 - best effort; the servers may be gone
                log.warning("could not free a job's state on the ps tasks: %s" % first_line(e))


def _check_free(coordinator, running, runs):
    """Raises unless a job can start on a cluster connected as `coordinator` (None: not
    open), running the job named `running` (None: none), after `runs`."""
    from tf2_mapreduce.run import runner

    if coordinator is None:
        raise ClusterError("the cluster is not open: use it as a context manager (with Cluster...)")
    if running is not None:
        raise Error("job %s is still running on this cluster: wait for it first" % running)
    if any(not run.drained(runner.DRAIN_TIMEOUT) for run in runs):
        raise ClusterError(
            "the map steps of the stopped job before are still running after %gs (a worker hangs?)"
            % runner.DRAIN_TIMEOUT
        )


def _listed(inputs, on_error):
    """`inputs` (specs, one spec, or an `Inputs` already listed) as an `Inputs`."""
    from tf2_mapreduce.inputs.files import Inputs
    from tf2_mapreduce.inputs.listing import expand

    if isinstance(inputs, Inputs):
        return inputs
    return expand([inputs] if isinstance(inputs, str) else list(inputs), on_error=on_error)


class Cluster:
    """A TensorFlow parameter-server cluster this process drives as its chief; use as a
    context manager. Entering starts its local servers, if any, and connects (blocking,
    at most `connect_timeout` s a step); leaving frees every result's state and tells
    the servers that the job is over, unless `keep_serving`.

    TensorFlow lets a process connect to one cluster in its life: open one, and run
    as many jobs on it as you like, one after another. Made by `local`,
    `from_tf_config` or `from_resolver`; `spec` is the `cluster_spec.ClusterSpec`.
    Settings, by keyword only (another is a `TypeError`): `keep_serving`,
    `connect_timeout`, `shutdown_timeout` (s to keep telling a task that does not answer
    that the job is over), `verbose` (show TensorFlow's native start-up lines).
    """

    def __init__(
        self,
        spec,
        *,
        keep_serving=ClusterSettings.keep_serving,
        connect_timeout=ClusterSettings.connect_timeout,
        shutdown_timeout=ClusterSettings.shutdown_timeout,
        verbose=ClusterSettings.verbose,
    ):
        self.spec = spec
        self.keep_serving = keep_serving
        self.connect_timeout = connect_timeout
        self.shutdown_timeout = shutdown_timeout
        self.verbose = verbose  # show TensorFlow's native start-up lines
        self._servers = None  # local_cluster.InProcessServers or ChildServers, for a local cluster
        self._coordinator = None
        self._heartbeats = None
        self._coordinator_id = None
        self._runs = []
        self._running = None  # the JobHandle of the job running, if one is

    @classmethod
    def local(cls, num_ps: int = 1, num_workers: int = 2, *, processes: bool = False, **settings) -> "Cluster":
        """A cluster on this machine: servers inside this process (fast to start), or
        `processes`, one child process per task as on a real cluster. Its ports listen
        on every interface while it runs (TensorFlow's servers cannot do otherwise);
        the CLI's default puts it in a private network namespace instead. `settings`:
        `connect_timeout`, `verbose` (see `Cluster`)."""
        spec = local_cluster.local_spec(num_ps, num_workers)
        cluster = cls(spec, **settings)
        cluster._servers = local_cluster.ChildServers(spec) if processes else local_cluster.InProcessServers(spec)
        return cluster

    @classmethod
    def from_tf_config(cls, tf_config: str | None = None, **settings) -> "Cluster":
        """The cluster `tf_config` (JSON; default: the TF_CONFIG environment variable)
        describes, this process being its chief. `settings`: those of `Cluster`."""
        text = tf_config if tf_config is not None else os.environ.get("TF_CONFIG")
        if not text:
            raise ClusterError("TF_CONFIG is not set: it must describe the cluster, with this process as its chief")
        return cls(cluster_spec.from_tf_config(text, expect_roles=("chief",)), **settings)

    @classmethod
    def from_resolver(cls, resolver, **settings) -> "Cluster":
        """The cluster a TensorFlow `ClusterResolver` describes (Slurm, Kubernetes, TPU VMs,
        `SimpleClusterResolver`...), this process being its chief. `settings`: those of `Cluster`."""
        jobs = {role: list(addresses) for role, addresses in resolver.cluster_spec().as_dict().items()}
        return cls(cluster_spec.validated(jobs, "chief", 0, ("chief",), type(resolver).__name__), **settings)

    @property
    def local_processes(self) -> bool:
        """Whether this cluster's servers are child processes of this one."""
        return self._servers is not None and not self._servers.in_process

    def start(self) -> "Cluster":
        """Starts this cluster's local servers, if any; idempotent. Returns at once for
        child processes (they boot meanwhile), after TensorFlow's import for in-process ones."""
        if not self.verbose:  # the run says what a failed map step or a lost task means, in one line
            quiet.hide_runtime_records()
        if self._servers is not None:
            if self._servers.in_process:
                quiet.import_tensorflow(self.verbose)
            self._servers.start()
        return self

    def connect(self) -> "Cluster":
        """Connects this process as the cluster's chief (`chief.connect`), then checks that every
        worker can run the map steps' ops. Blocking; raises `ClusterError` naming what did not answer."""
        if self._coordinator is not None:
            return self
        if _connected:
            raise ClusterError(
                "this process is already connected to a cluster (TensorFlow allows one per process): run the next jobs on it"
            )
        from tf2_mapreduce.cluster import channel as server_channel
        from tf2_mapreduce.cluster.heartbeats import Heartbeats

        self.start()
        self._coordinator = chief.connect(self.spec, self._servers, self.connect_timeout, self.verbose)
        _connected.append(self)
        self._coordinator_id = server_channel.new_coordinator_id()
        if self._servers is None or not self._servers.in_process:
            self._heartbeats = Heartbeats(self.spec, self._coordinator_id).__enter__()
            try:
                chief.check_native(self.spec)
            except BaseException:
                # Left beating, they would be in TensorFlow as the interpreter exits.
                self._stop_heartbeats()
                raise
        return self

    def _stop_heartbeats(self):
        if self._heartbeats:
            self._heartbeats.__exit__(None, None, None)
            self._heartbeats = None

    def close(self, error: BaseException | None = None) -> None:
        """Stops a job still running as `JobHandle.cancel` does, and waits for its end;
        frees every job's state on the ps tasks (best effort) and, unless `keep_serving`
        or `error` is a `ClusterError` (the servers then wait for the rerun), tells the
        servers that the job is over: a task that does not answer is tried again for
        `shutdown_timeout` s. Local servers are then reaped. Blocking."""
        running = self._running
        if running is not None:
            # Its thread, a daemon, would otherwise still be in TensorFlow as the servers
            # go and the interpreter exits (which aborts the process).
            running.cancel()
            running._finished.wait()
        self._stop_heartbeats()
        in_process = self._servers is not None and self._servers.in_process
        if (self.keep_serving or in_process) and not isinstance(error, ClusterError):
            _release(self._runs)  # servers that outlive this process (or live in it) would keep it
        told = self._coordinator_id is not None and not in_process
        if told and not isinstance(error, ClusterError) and (self._servers is not None or not self.keep_serving):
            chief.tell_job_over(self.spec, self._coordinator_id, self._servers, self.shutdown_timeout)
        if self._servers is not None:
            self._servers.close()

    def __enter__(self) -> "Cluster":
        try:
            return self.start().connect()
        except BaseException:
            if self._servers is not None:
                self._servers.close()
            raise

    def __exit__(self, kind, error, traceback) -> None:
        self.close(error)

    def _busy(self) -> bool:
        """Whether a job runs on this cluster now: read when a result is written, perhaps
        as the next job runs."""
        return self._running is not None

    def prepare(self, job, inputs, **options):
        """`job` (a `Job`, or a `run.passes.Passes`: a job of several passes) fit to `inputs`
        (files, directories, globs, @lists, any tf.io.gfile path; or an
        `inputs.files.Inputs` already listed) and `options`, before anything runs
        (`run.runner.prepare`; a job of passes prepares each as it comes): what `submit`
        (a plain job) and `run` take in their place. Blocking (lists the inputs); needs no
        connection. Raises `InputError` / `UsageError` for inputs that do not fit the job,
        `TypeError` for an unknown option."""
        from tf2_mapreduce.jobs.base import Job
        from tf2_mapreduce.run import runner
        from tf2_mapreduce.run.passes import Passes, PreparedPasses

        run_options = Options.of(**options)
        if not isinstance(job, (Job, Passes)):
            raise TypeError("job must be a tf2_mapreduce Job (such as tf2_mapreduce.WordCount()), not %r" % (job,))
        if isinstance(job, Passes) and not job.RUNNER:
            raise TypeError("%s is a job of passes that names no RUNNER (the module that runs it)" % job.name)
        with storage.waiting(storage.Patience(run_options.storage_timeout)):
            found = _listed(inputs, run_options.on_error)
            if isinstance(job, Passes):
                job.check()
                return PreparedPasses(job, found, dict(options))
            return runner.prepare(job, found, run_options)

    def submit(self, job, inputs=None, *, on_progress: Callable | None = None, **options) -> JobHandle:
        """Starts `job` (a `Job`) over `inputs` (files, directories, globs, @lists; any
        tf.io.gfile path) and returns at once, once the inputs are listed and planned
        (blocking). `options` are those of `run.options.Options` (`on_error`,
        `checkpoint_dir`, `read_size`...): another name is a `TypeError`. `job` may be
        what `prepare` made instead, with no `inputs` nor `options`.
        `on_progress(Progress)` is called every `progress_every` s, from another thread.
        Exactly-once: see `Result`. Raises `InputError` for inputs that cannot be used."""
        from tf2_mapreduce.run import runner
        from tf2_mapreduce.run.passes import Passes, PreparedPasses

        if isinstance(job, (Passes, PreparedPasses)):
            raise TypeError(
                "a job of several passes (%s) runs with Cluster.run, to its end" % getattr(job, "job", job).name
            )
        if isinstance(job, runner.Prepared) and (inputs is not None or options):
            raise TypeError("a prepared job carries its inputs and options: give neither")
        Options.of(**options)
        _check_free(self._coordinator, self._running and self._running.name, self._runs)
        prepared = job if isinstance(job, runner.Prepared) else self.prepare(job, inputs, **options)
        handle = JobHandle(prepared.job.name, on_progress, self)
        run = runner.JobRun(prepared, self._coordinator, self.spec, self._heartbeats, handle._report, self._busy)
        self._runs.append(run)
        self._running = handle
        handle._start(run)
        return handle

    def run(
        self, job, inputs: Sequence[str] | None = None, *, on_progress: Callable | None = None, **options
    ) -> Result:
        """Runs `job` over `inputs` to its end; blocking. See `submit` for the arguments.
        A job of passes (`run.passes.Passes`: a `Transform`) runs each in turn; a
        `Transform` writes `output_dir` (an option it needs)."""
        from tf2_mapreduce.run import runner
        from tf2_mapreduce.run.passes import PreparedPasses

        _check_free(self._coordinator, self._running and self._running.name, self._runs)  # before any listing
        if isinstance(job, (runner.Prepared, PreparedPasses)):
            if inputs is not None or options:
                raise TypeError("a prepared job carries its inputs and options: give neither")
            prepared = job
        else:
            prepared = self.prepare(job, inputs, **options)

        def prepare(pass_job, pass_options):
            return self.prepare(pass_job, prepared.found, **pass_options)

        return prepared.run(prepare, lambda ready: self.submit(ready, on_progress=on_progress).wait())
