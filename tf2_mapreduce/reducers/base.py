"""The reducer protocol: what a job's map output means, as what it computes and nothing
else. How a result is worded and written lives in `outputs`; the CLI prints it."""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from tf2_mapreduce.errors import MAP_OUTPUT, MapOutputError
from tf2_mapreduce.inputs.files import Files
from tf2_mapreduce.lazy_tf import tf

__all__ = [
    "Reducer",
    "Collected",
    "FileValue",
    "PerFile",
    "NO_FILES",
    "MapOutputError",
    "assert_in_graph",
    "as_tensor",
    "count_text",
    "label",
]


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
        self._files, self._values, self._to_python = Files.of(files), values, to_python
        self._index = np.flatnonzero(done)

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[n] for n in range(*k.indices(len(self)))]
        index = self._index[k]
        f = self._files[index]
        return FileValue(f.path, f.size, self._to_python(self._values[index]))

    def __iter__(self) -> Iterator:
        # From the columns: a million of them in a second, not through __getitem__'s five.
        paths, index = self._files.paths, self._index.tolist()
        values = self._values[self._index]
        for i, size, value in zip(index, self._files.sizes[self._index].tolist(), values):
            yield FileValue(paths[i], size, self._to_python(value))

    def __repr__(self) -> str:
        return "PerFile(%d files)" % len(self)


NO_FILES = PerFile([], np.zeros(0, np.int64), np.zeros(0, bool), None)


@dataclass(frozen=True)
class Collected:
    """A finished run's result as `Reducer.collect` reads it from the ps tasks.

    `problems`: faults of inputs that the result holds (a feature of two types): the run
    fails with the first of them unless on_error="skip", which keeps the result as it is.
    `absent`: what the job named that no input holds (a feature in no example, not
    marked optional): the job says what that means (`Job.finished`)."""

    total: object  # the job's value: an int, a tuple for a vector, a `DatasetStats`...
    distinct: int | None  # distinct keys of a per-key result
    per_file: object  # `outputs.result.PerFile`: each file's value, or none for a per-key result
    problems: tuple = ()
    absent: tuple = ()
    examples: int = 0  # the records a job over tf.Example records read, for what `absent` means


class Reducer:
    """Base of every reducer: one object per kind of result, what it computes in four
    operations (as Beam's CombineFn), for one run of a job:

    1. **Check and combine, on the worker** (`run.mapstep`, traced once per run):
       `check(output, items, job)` takes the job's `map_fn` output for `items` texts or
       records and returns it as the reducer takes it, or fails the job naming what
       map_fn returned and what is needed (`MapOutputError`: at tracing, or in the graph
       for what only the data tells). `combine(output)` makes one piece's output what is
       committed (its keys counted once, say), of type `spec()`. A streamed piece (a
       compressed file, a TFRecord file) is mapped a batch at a time: `start()`, then
       `add(value, output)` per batch, then `finish(value)`, which gives what `combine`
       would. `merge(values)` makes the combined values of a step's pieces (stacked by
       `tf.map_fn`) one commit; a step of whole files maps them in one `map_fn` call,
       and `combine_step(output)` makes that output one commit.
    2. **State, on the ps tasks**: `create_state(sizes, ps_devices, run_id)` is this
       run's state (`state.slots.PieceSlots`, `state.key_tables.KeyTables`): it commits
       each piece's value exactly once however often its map step runs, is
       checkpointed, and gives its `figures()` so far.
    3. **Progress**: `value(figures)` is the job's value so far, as Python numbers.
    4. **Collect, on the coordinator**: `collect(state, plan, piece_done)` reads the
       result back from the state once every piece is done (`Collected`).

    `Fold` is the base to subclass for a reducer of one's own (a value per piece). A job
    whose map output is written rather than reduced has a sink instead (`Records`).
    """

    def check(self, output, items, job: str):
        raise NotImplementedError

    def spec(self):
        raise NotImplementedError

    def combine(self, output):
        raise NotImplementedError

    def start(self):
        raise NotImplementedError

    def add(self, value, output):
        raise NotImplementedError

    def finish(self, value):
        return value

    def merge(self, values):
        return values

    def combine_step(self, output):
        raise NotImplementedError

    def create_state(self, sizes, ps_devices, run_id):
        raise NotImplementedError

    def value(self, figures):
        raise NotImplementedError

    def collect(self, state, plan, piece_done) -> Collected:
        raise NotImplementedError


def label(reducer) -> str:
    """A reducer as a message names it: its repr where it is a dataclass (`Sum(unit='words')`),
    else its class's name."""
    return repr(reducer) if hasattr(reducer, "__dataclass_fields__") else type(reducer).__name__


def as_tensor(output, job: str, needs: str):
    """`output`, what a job's map_fn returned, as a tensor; a `MapOutputError` saying what it
    returned and what the reducer `needs` where it cannot be one."""
    if isinstance(output, tf.Tensor):
        return output
    try:
        return tf.convert_to_tensor(output)
    except (TypeError, ValueError):
        raise MapOutputError("job %s: map_fn returned a %s, but %s" % (job, type(output).__name__, needs)) from None


def assert_in_graph(ok, text, output):
    """`output`, once `ok` (a bool scalar tensor) holds; else the map step fails with `text`
    (a string tensor), marked as a map output's fault (`MAP_OUTPUT`). For what only the data
    tells: how many values map_fn returned for how many texts."""
    check = tf.debugging.Assert(ok, [tf.strings.join([MAP_OUTPUT, text])], summarize=1)
    with tf.control_dependencies([check]):
        return tf.nest.map_structure(tf.identity, output)


def count_text(shape, items, item):
    """`shape` (an int64 vector) and `items` (a count, or None) as words, in the graph:
    "[7, 2] for 3 texts"."""
    parts = ["[", tf.strings.reduce_join(tf.strings.as_string(shape), separator=", "), "]"]
    if items is not None:
        items = tf.cast(items, tf.int64)
        parts += [" for ", tf.strings.as_string(items), tf.where(tf.equal(items, 1), " " + item, " %ss" % item)]
    return tf.strings.join(parts)
