"""The sink protocol: a job's map output written rather than reduced, in the steps of
Beam's FileBasedSink; `sink_of` is where the runner and the result ask which a job has."""

__all__ = ["Sink", "sink_of"]


class Sink:
    """Base of every sink: where a job's map output goes when it is written, not reduced,
    for one run of the job into an output directory. A job takes one where it takes a
    reducer (`Job(reducer=Records(...))`).

    What the runner asks of every job's output, it asks of a sink as `reducers.Reducer`
    says: `check(output, items, job, item)` the map output, `spec()` of what a piece
    commits (here a row naming the files it wrote), `create_state(sizes, ps_devices,
    run_id)` the exactly-once state on the ps tasks, `value(figures)` progress, and
    `collect(state, plan, piece_done)` the result. The write itself, in its steps:

    1. `check_job(job, output_dir)`, in `run.runner.prepare`, before anything runs:
       raises `UsageError` where the job cannot write (no output directory, say).
    2. `initialize_write(output_dir, state, read)`, on the coordinator once the run's
       state is restored, before any map step: prepares the output directory (claimed
       for one writer by `outputs.directory`) for the map steps' files, and forgets
       the committed pieces whose files are not there.
    3. `open_writer(output_dir)`: what each map step (`run.mapstep`) writes a piece's
       output with, on a worker, and the row it commits for the piece: written under
       a name of the step's own attempt, so a step run twice leaves whole files only.
    4. `finalize_write(output_dir, state, staging, workers)`, on the coordinator once
       every piece is committed: the committed pieces' files joined into the result's
       files in `staging` (by the run's workers: `run.on_workers.OnWorkers`), which `outputs.directory.ResultDirectory` puts in place whole,
       removing every piece's file.
    """

    def check(self, output, items, job: str, item: str = "text"):
        raise NotImplementedError

    def spec(self):
        raise NotImplementedError

    def create_state(self, sizes, ps_devices, run_id):
        raise NotImplementedError

    def value(self, figures):
        raise NotImplementedError

    def collect(self, state, plan, piece_done):
        raise NotImplementedError

    def check_job(self, job, output_dir: str | None) -> None:
        raise NotImplementedError

    def initialize_write(self, output_dir: str, state, read) -> None:
        raise NotImplementedError

    def open_writer(self, output_dir: str):
        raise NotImplementedError

    def finalize_write(self, output_dir: str, state, staging: str, workers) -> dict:
        raise NotImplementedError


def sink_of(reducer) -> Sink | None:
    """A job's `reducer` as the sink that writes its map output, or None where it is a
    reducer: the one place that tells a writing job from a reducing one."""
    return reducer if isinstance(reducer, Sink) else None
