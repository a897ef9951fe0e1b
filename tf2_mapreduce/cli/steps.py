"""The coordinator's steps, in order: every check that needs no cluster, the listing in a
child process, the local servers, TensorFlow's import, the job fit to its inputs, the
run, its result printed and written. Errors become one line and an exit status here."""

import os
import signal
import sys
import time
import traceback

from tf2_mapreduce import jobs, native, quiet, storage
from tf2_mapreduce.cli import cluster_flags, console
from tf2_mapreduce.cli.console import say
from tf2_mapreduce.cluster import netns
from tf2_mapreduce.cluster import sources as cluster_sources
from tf2_mapreduce.cluster.spec import ROLES, TASK_ENV
from tf2_mapreduce.errors import Error, Interrupted, UsageError
from tf2_mapreduce.inputs import background
from tf2_mapreduce.inputs.files import sample_corpus
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.jobs.transform import (
    Transform,
    check_apart,
    check_findable,
    check_given,
    check_transform_output,
)
from tf2_mapreduce.outputs.directory import ResultDirectory
from tf2_mapreduce.paths import local_path

__all__ = ["Command", "LOCAL_ONLY", "OPTIONS"]

LOCAL_ONLY = ("num_ps", "num_workers", "local_cluster")
# The flags that are `run.options.Options` of the same name, but --files_per_step.
OPTIONS = ("on_error", "format", "compression", "checkpoint_dir", "output_dir", "split_size", "read_size")
OPTIONS += ("checkpoint_every", "worker_timeout", "storage_timeout", "progress_every")


class Command:
    """One run of `python -m tf2_mapreduce.coordinator` with the flag `values` over input
    `specs`; `run()` returns the exit status. Started at `started` (time.monotonic())."""

    def __init__(self, values, specs, started):
        self.values = values
        self.specs = specs
        self.started = started
        self.stop_requests = []
        self.listing = self.cluster = self.output_dir = None
        self.job = None  # a built-in job, made before TensorFlow is imported
        self.configured = None  # how the cluster was configured, None for a local one
        self.build_seconds = 0.0

    def run(self) -> int:
        error, code = None, 0
        try:
            with storage.waiting(storage.Patience(self.values.storage_timeout)):
                self._steps()
        except Interrupted as e:
            error, code = e, e.exit_code
            say(e.cli_message())
        except Error as e:
            error, code = e, e.exit_code
            say("error: %s" % e.cli_message())
        except Exception as e:  # a bug: say so, then leave through the same exit as every run
            error, code = e, 1
            traceback.print_exc()
            say("error: internal error, a bug in tf2_mapreduce: please report it with the traceback above")
        finally:
            if self.listing is not None:
                self.listing.close()
            if self.output_dir is not None:
                self.output_dir.release()
            if self.cluster is not None:
                self.cluster.close(error)
        if code == 0:
            say("done in %.1f s" % (time.monotonic() - self.started - self.build_seconds))
        return code

    def _steps(self):
        v = self.values
        spec = cluster_sources.resolve(cluster_flags.source(v), expect_roles=("chief",))
        self.configured = cluster_sources.describe(cluster_flags.source(v)) if spec else None
        self._check_flags()
        # Listing many files takes seconds: started first, it runs while TF is imported.
        self.listing = background.BackgroundListing(self.specs or [sample_corpus()], v.on_error)
        outputs = [v.output, v.output_dir, v.checkpoint_dir, v.logdir]
        exposed = None if self.configured else netns.isolate(v.private_network, self.specs + outputs)
        self.cluster = self._cluster(spec)
        quiet.import_tensorflow(verbose=v["verbosity"].present)
        before = time.monotonic()
        native.load()  # the first run on a machine builds the native ops, and says so
        if native.built_here():
            self.build_seconds = time.monotonic() - before
        job = self.job or self._user_job()
        found = self._inputs()
        if self.configured:
            # Connected first: whether every task has the native ops decides which inputs fit.
            self.cluster.connect()
            prepared = self._prepare(job, found)
        else:
            prepared = self._prepare(job, found)  # before the local cluster starts
            self._start_local(exposed)
            self.cluster.connect()
        self._run(prepared)

    def _parameters(self):
        return {name: self.values[name].value for name in jobs.parameters()}

    def _check_flags(self):
        """Every check of the flags that needs neither TensorFlow nor a cluster; raises `UsageError`."""
        v = self.values
        jobs.check(v.job, self._parameters())
        self._check_job_outputs()
        native.mode()
        if self.configured:
            for name in LOCAL_ONLY:
                if v[name].present:
                    raise UsageError(
                        "--%s is for the local cluster; %s already defines the cluster" % (name, self.configured)
                    )
        elif v.keep_serving:
            raise UsageError(
                "--keep_serving needs a configured cluster (TF_CONFIG...); a local cluster ends with its job"
            )
        self._claim_outputs(local=True)

    def _check_job_outputs(self):
        """`--output` and `--output_dir` as the job writes its result. A built-in job is
        made here, without TensorFlow; a transform imports its preprocessing_fn's module
        (and so TensorFlow) only once the listing is forked, and a user's job too
        (`_user_job`)."""
        v = self.values
        if v.job == Transform.COMMAND:
            check_given(v.preprocessing_fn, v.transform_output, v.schema, v.custom_config)
            if v.output or not v.output_dir:
                raise UsageError(
                    "{setting:job}=transform writes a directory: give {setting:output_dir}, not {setting:output}"
                )
            if v.preprocessing_fn:
                check_findable(v.preprocessing_fn, v.schema)
            else:
                check_apart(v.transform_output, v.output_dir)
                check_transform_output(v.transform_output)
        elif v.job in jobs.built_in():
            self.job = jobs.resolve(v.job, self._parameters())
            self._check_writes(self.job)

    def _user_job(self):
        """The job of a user's module ("module:ATTRIBUTE"), or a transform, made once
        TensorFlow is imported; its outputs checked as `_check_job_outputs` checks a built-in job's."""
        job = jobs.resolve(self.values.job, self._parameters())
        if isinstance(job, Job):  # a job of passes writes its own directory
            self._check_writes(job)
        return job

    def _check_writes(self, job):
        """Raises `UsageError` unless the result of `job` can be written as `--output` and `--output_dir` ask."""
        from tf2_mapreduce.outputs import writers

        v = self.values
        if v.output:
            writers.check_output(job.reducer, v.output)
        if v.output_dir:
            writers.check_output_dir(job.reducer)

    def _claim_outputs(self, local):
        """Checks that `--output` can be written and claims `--output_dir` for this job:
        local paths before TensorFlow is imported, the others (gs://...) once it can
        reach them."""
        from tf2_mapreduce.outputs import files

        v = self.values
        if v.output and (local_path(v.output) is not None) == local:
            files.check_path(v.output)
        if v.output_dir and (local_path(v.output_dir) is not None) == local:
            self.output_dir = ResultDirectory(v.output_dir)
            self.output_dir.claim()

    def _cluster(self, spec):
        """The `Cluster` to run on: the configured one (`spec`), or a local one (its children started)."""
        from tf2_mapreduce.client import Cluster

        v = self.values
        settings = dict(connect_timeout=v.connect_timeout, verbose=v["verbosity"].present)
        if spec:
            return Cluster(spec, keep_serving=v.keep_serving, shutdown_timeout=v.shutdown_timeout, **settings)
        processes = v.local_cluster == "processes"
        cluster = Cluster.local(v.num_ps, v.num_workers, processes=processes, **settings)
        if processes:
            cluster.start()  # child servers boot while TensorFlow is imported here
        return cluster

    def _inputs(self):
        """The inputs the listing found, with notes on what was left out; says what runs where."""
        if not self.specs:
            say("no --input given: using the sample corpus in %s" % self.listing.specs[0])
        found = self.listing.result()
        for line in console.input_notes(found):
            say(line)
        where = self.cluster.spec.describe() + (" (local)" if self.cluster.local_processes else "")
        total = console.human_bytes(found.total_bytes)
        say("%s over %d files (%s) on %s" % (self.values.job, len(found.files), total, where))
        return found

    def _prepare(self, job, found):
        """`job` fit to the inputs `found` (a job of passes: checked, each pass prepared as
        it comes); fails before the cluster starts where it cannot be run or its result
        cannot be written as asked."""
        prepared = self.cluster.prepare(job, found, max_pieces=self.values.files_per_step, **self._options())
        self._claim_outputs(local=False)
        return prepared

    def _options(self):
        return {name: self.values[name].value for name in OPTIONS}

    def _start_local(self, exposed):
        cluster = self.cluster
        cluster.start()
        tasks = ", ".join("%s %s" % (role, address) for role, _, address in cluster.spec.tasks())
        say("started a local cluster%s: %s" % ("" if cluster.local_processes else " in this process", tasks))
        if exposed:
            ports = ",".join(address.rsplit(":", 1)[1] for _, _, address in cluster.spec.tasks(ROLES))
            say(
                "warning: while the job runs, anyone who reaches this machine can run code on the local "
                "cluster's ports %s (%s)" % (ports, exposed)
            )

    def _wait(self, prepared):
        """Runs the prepared job on the connected cluster, saying its progress; its `Result`."""
        v = self.values
        reporters = [lambda p: say(console.progress_line(prepared.job.reducer, p))]
        writer = None
        if v.logdir:
            from tf2_mapreduce.outputs.summaries import Summaries

            writer = Summaries(v.logdir, prepared.job.reducer)
            reporters.append(writer.write)
        try:
            handle = self.cluster.submit(
                prepared, on_progress=lambda progress: [report(progress) for report in reporters]
            )
            self.stop_requests.append(handle.cancel)
            return handle.wait()
        finally:
            if writer is not None:
                writer.close()

    def _run(self, prepared):
        """Runs the prepared job on the connected cluster (each of its passes, said as it
        starts), then prints and writes its result."""
        v = self.values

        def prepare(job, pass_options):  # a pass: its options are those the job was prepared with, and its own
            say("%s: %s" % (job.name, job.description))
            return self.cluster.prepare(job, prepared.found, **pass_options)

        result = prepared.run(prepare, self._wait, claimed=self.output_dir)
        since = self.started + self.build_seconds  # timed from the process start, the one-off build apart
        # Before the servers are told to exit: per-key results are read from the ps tasks.
        written = result.written  # a job of passes wrote its directory itself
        if v.output_dir and written is None:
            written = result.write_dir(
                v.output_dir, v.top_k, v.min_count, v.vocabulary_format, since=since, claimed=self.output_dir
            )
        console.print_result(result, v.top_k, v.min_count, v.vocabulary_format, written)
        if v.output_dir:
            say(console.wrote(written, v.output_dir))
        if v.output:
            result.write(v.output, v.min_count, since=since)
            say("wrote %s" % v.output)

    def handle_stop_signals(self):
        """SIGINT and SIGTERM ask a running job to checkpoint and stop (it then exits
        130 or 143); before the job runs, or on a second signal, they stop at once."""

        def on_signal(signum, frame):
            if self.stop_requests:
                self.stop_requests.pop()(signum)
            else:
                raise Interrupted(signum, "stopped by signal %d" % signum)

        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, on_signal)


def prepare_process(verbose: bool) -> None:
    """What the coordinator's process needs before anything else: TensorFlow's logs
    quiet (or all shown with `verbose`), the library's log on stderr, and the
    environment every task of a cluster needs before TensorFlow is imported."""
    from absl import logging as absl_logging

    if verbose:
        quiet.show_tensorflow_logs()
    else:
        absl_logging.set_verbosity(absl_logging.WARNING)  # TF logs its whole config at INFO
        quiet.hide_runtime_records()
    console.show_log()
    for name, value in TASK_ENV.items():
        os.environ.setdefault(name, value)


def leave(code: int) -> None:
    """Exits with `code` at once. The servers were told to exit (or live in this process):
    a normal interpreter teardown would only try to release TF's remote state on them and
    log a screen of connection errors. TensorFlow's own exit clean-up is done here:
    AutoGraph's generated files are removed."""
    sys.stdout.flush()
    sys.stderr.flush()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None) or ""
        if os.path.basename(path).startswith("__autograph_generated_file"):
            try:
                os.unlink(path)
            except OSError:
                pass
    os._exit(code)
