"""The reducer protocol: what a job's map output means. One object per kind of result
declares everything the package does with it; nothing else asks which kind it is."""

from dataclasses import dataclass

from tf2_mapreduce.errors import UsageError

__all__ = ["Reducer"]  # `Collected` is the runner's, not a job's


@dataclass(frozen=True)
class Collected:
    """A finished run's result as read back from the ps tasks by `Reducer.collect`."""

    total: object  # the job's value: an int, a tuple for a vector, None for a min/max of nothing
    distinct: int | None  # distinct keys of a per-key result
    per_file: object  # `result.PerFile`: each file's value, or none for a per-key result


class Reducer:
    """Base of every reducer. Its lifecycle, for one run of a job, by who calls what:

    1. The map step, on the workers (`mapstep`):
       - `piece_spec()`: the type of one piece's output after `combine` (the step's
         signature, traced once per run);
       - `combine(output)`: the job's `map_fn` output for one piece becomes what is
         committed (keys counted once on the worker, say). A streamed piece (a
         compressed or TFRecord file) is mapped a batch at a time instead:
         `stream_start()` is its value before the first batch,
         `stream_fold(value, output)` folds each batch's output into it, and
         `stream_finish(value)` makes the last value what `combine` would give;
       - `batch(outputs)`: a step's per-piece outputs, stacked by `tf.map_fn`, become
         what the state commits. A step of whole files maps them in one `map_fn` call
         instead, and `combine_step(output)` makes that output what the state commits.
    2. The run, on the coordinator (`run_state`): `new_state(sizes, ps_devices,
       run_id)` is this run's state on the ps tasks (`slots.PieceSlots`,
       `tables.KeyTables`): it commits each piece exactly once (`commit(ids, value,
       piece_bytes)`, in the map step), is checkpointed, and its `stats()` are the
       figures so far.
    3. Progress (`runner`, the CLI's lines, TensorBoard): `value(stats)` is the job's
       value so far; `describe(value, distinct)` says it in words ("901 words"),
       `fields(value, distinct)` as named numbers, `rates(before, after, seconds)` as
       numbers per second where a rate means something.
    4. The result: `collect(state, plan, piece_done)` reads it back (`Collected`);
       a per-key result is read from the ps tasks on demand: `entries`, `top`.
    5. Output: `check_output(path)` before the job and `write_output(state, path,
       result, min_count, document)` after it (`--output`); `check_output_dir()` and
       `write_dir(state, result, output_dir, ...)` (`--output_dir`), and `wrote(summary,
       output_dir)`, the CLI's line about it; `summary_lines(state, ...)`, what the CLI
       prints under its headline. `state` is the run's, still on the ps
       tasks; `document` the run's own fields (`result.Result.document`).

    Adding a kind of result is one class that fills these in.
    """

    def piece_spec(self):
        raise NotImplementedError

    def combine(self, output):
        raise NotImplementedError

    def batch(self, outputs):
        return outputs

    def combine_step(self, output):
        raise NotImplementedError

    def stream_start(self):
        raise NotImplementedError

    def stream_fold(self, value, output):
        raise NotImplementedError

    def stream_finish(self, value):
        return value

    def new_state(self, sizes, ps_devices, run_id):
        raise NotImplementedError

    def value(self, stats):
        raise NotImplementedError

    def describe(self, value, distinct=None) -> str:
        raise NotImplementedError

    def fields(self, value, distinct=None) -> dict:
        """The value as named numbers (progress, TensorBoard's totals/, per-file rows)."""
        raise NotImplementedError

    def rates(self, before, after, seconds) -> dict:
        """Named numbers per second between two values (TensorBoard's throughput/): none
        unless the value only grows as pieces are done."""
        return {}

    def collect(self, state, plan, piece_done) -> Collected:
        raise NotImplementedError

    def entries(self, state, min_count=1):
        raise TypeError("%s has no per-key table" % type(self).__name__)

    def top(self, state, k, min_count=1):
        raise TypeError("%s has no per-key table" % type(self).__name__)

    def check_output(self, path):
        """Raises `UsageError` unless `write_output` can write `path`."""
        raise NotImplementedError

    def write_output(self, state, path, result, min_count, document):
        raise NotImplementedError

    def check_output_dir(self):
        """Raises `UsageError` unless `write_dir` can write a directory."""
        raise UsageError("{setting:output_dir} is for wordfreq, vocab and stats; this job writes {setting:output}")

    def write_dir(self, state, result, output_dir, top_k, min_count, file_format, document) -> dict:
        """Writes the result's files under `output_dir` (None: only says what it would
        write); returns their summary, for `wrote` and `summary_lines`."""
        raise TypeError("%s writes no directory" % type(self).__name__)

    def wrote(self, summary, output_dir) -> str:
        """What the CLI says once `write_dir` wrote `summary` to `output_dir`."""
        raise NotImplementedError

    def summary_lines(self, state, result, top_k, min_count, written) -> list:
        """What the CLI prints under its headline; `written`: the summary that
        `write_dir` returned, if the CLI wrote a directory."""
        return []
