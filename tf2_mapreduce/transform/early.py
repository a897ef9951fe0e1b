"""What is checked of a transform before its passes: the function traced over the schema of
the first examples, and transform_fn saved over large inputs: a broken function fails in seconds."""

import contextlib
import itertools
import shutil
import tempfile

from tf2_mapreduce import log
from tf2_mapreduce.errors import Error, UsageError, raised_by_user_code, raised_here
from tf2_mapreduce.jobs.features import SAMPLE_RECORDS, sample_examples
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.paths import join
from tf2_mapreduce.transform import analysis, saved
from tf2_mapreduce.transform import schema as schemas
from tf2_mapreduce.transform.applied import SavedTransform

__all__ = ["TRIAL_BYTES", "check_on_first_examples", "check_saves", "saving"]

# Traces at most to find whether a function fails over every schema its data may have.
MAX_TRACES = 8
# Inputs of more than this many bytes (compressed files as stored) are worth a trial save
# before their passes (`check_saves`). Over fewer, the analyze passes take about as long as
# the trial (a second or two; a function of many analyzers takes seconds to save and load:
# 7.5 s of 18 for the compat tier's over 3,000 examples), which would then cost every run
# that saves to spare the few that cannot; those fail after an analyze pass instead,
# with the same error (`saving`).
TRIAL_BYTES = 32 << 20


class _Watched(dict):
    """The raw features, noting which the function asks for (`read`), and whether it
    looked at them all (`whole`: their names, their number, a copy...)."""

    def __init__(self, inputs=(), /):
        super().__init__(inputs)
        self.read, self.whole = set(), False

    def __getitem__(self, name):
        self.read.add(name)
        return super().__getitem__(name)

    def get(self, name, default=None):
        self.read.add(name)
        return super().get(name, default)

    def __contains__(self, name):
        self.read.add(name)
        return super().__contains__(name)

    def _all(self, method):
        def seen(*args, **kwargs):
            self.whole = True
            return getattr(super(_Watched, self), method)(*args, **kwargs)

        return seen

    def __getattribute__(self, name):
        if name in ("keys", "items", "values", "copy", "pop", "popitem", "update", "setdefault"):
            return object.__getattribute__(self, "_all")(name)
        return object.__getattribute__(self, name)

    def __iter__(self):
        self.whole = True
        return super().__iter__()

    def __len__(self):
        self.whole = True
        return super().__len__()

    def __reversed__(self):
        self.whole = True
        return super().__reversed__()


def _trace(fn, spec):
    """(the `UsageError` tracing `fn` over `spec` raises, or None; the features it read
    then, or None where that is not known for sure)."""
    try:
        analysis.trace_calls(fn, spec)
        return None, set()
    except UsageError as e:
        error = e
    # Traced again, watched, for what it reads: where watching changes what it does (a
    # library that takes a dict's subclass for a leaf), nothing is sure.
    watched = []

    def given(inputs):
        watched.append(_Watched(inputs))
        return watched[-1]

    try:
        analysis.trace_calls(fn, spec, given)
        return error, None
    except UsageError as e:
        if str(e) != str(error) or not watched:
            return error, None
    seen = watched[-1]
    # A feature it asked for that these examples lack (`get`, `in`, a KeyError caught) may
    # be there further on; one it read past the dict's own methods (tf.nest) is not known.
    consumed = {
        name
        for name, tensor in dict.items(seen)
        if any(part.consumers() for part in tf.nest.flatten(tensor, expand_composites=True))
    }
    if seen.whole or seen.read - set(spec) or consumed - seen.read:
        return error, None
    return error, seen.read


def _failure(fn, spec):
    """(the error of tracing `fn` over `spec`, the schema of some first examples, or None;
    whether it fails so over every schema that the examples further on may give). There,
    each FixedLen feature may be VarLen (a feature absent further on; a VarLen one stays
    VarLen), and features of no example yet may be: a function that reads one, or looks at
    them all, may trace otherwise. Tracing is deterministic: a function given the same
    specs of the features it reads fails the same way. So each combination of the FixedLen
    features read is traced, and of those read under it, `MAX_TRACES` traces at most."""
    error, read = _trace(fn, spec)
    if error is None or read is None:
        return error, False
    fixed = {name for name, feature in spec.items() if isinstance(feature, tf.io.FixedLenFeature)}
    tried, traces = set(), 1
    while True:
        uncertain = sorted(read & fixed)
        untried = [
            frozenset(subset)
            for size in range(1, len(uncertain) + 1)
            for subset in itertools.combinations(uncertain, size)
            if frozenset(subset) not in tried
        ]
        if not untried:
            return error, True
        for subset in untried:
            if traces >= MAX_TRACES:
                return error, False
            tried.add(subset)
            traces += 1
            other = {n: tf.io.VarLenFeature(f.dtype) if n in subset else f for n, f in spec.items()}
            failed, more = _trace(fn, other)
            if failed is None or more is None:
                return error, False
            read = read | more


def check_on_first_examples(fn, paths, compression="auto", on_error="fail") -> None:
    """Traces `fn` over the schema of the first examples of `paths`, before the pass of
    statistics infers every example's: raises the `UsageError` the function fails with
    where its failure is sure (those examples are all there are, or it fails over every
    schema the others may give); else warns that it fails there, and the pass decides.
    With `on_error` "skip", nothing is sure: the pass may leave out what the first
    examples hold (their files, a feature's type that most examples do not have).
    Blocking (reads up to `SAMPLE_RECORDS` records)."""
    passed_over = []
    examples = list(sample_examples(paths, compression, SAMPLE_RECORDS, passed_over))
    schema, mixed = schemas.inferred_of_examples(examples)
    spec = schemas.feature_spec(schema)
    # A feature of two types: the pass keeps the type most examples have.
    unsure = bool(mixed) or on_error != "fail"
    if len(examples) < SAMPLE_RECORDS and not passed_over and not unsure:  # every example: its schema is the one
        analysis.trace_calls(fn, spec)
        return
    error, sure = _failure(fn, spec) if not unsure else (_trace(fn, spec)[0], False)
    if sure:
        raise error
    if error is not None:
        log.warning(
            "%s: over the schema of the first %d examples; the statistics pass infers every example's, over "
            "which it may not fail" % (error.args[0], len(examples))
        )


@contextlib.contextmanager
def saving():
    """Saving transform_fn (or what a later phase reads through) and loading it: what the
    user's function or TensorFlow's saving of it raised, as the one-line `UsageError` that
    says why it cannot be saved. Not the machine's errors (a disk full, memory) nor one
    raised in this package's own code (a bug of ours, reported as one), nor an OpError."""
    try:
        yield
    except (Error, tf.errors.OpError, OSError, MemoryError):
        raise
    except Exception as e:  # noqa: BLE001 - the user's function, saved: what TensorFlow said, in one line
        if raised_here(e):
            raise
        raise UsageError("{setting:preprocessing_fn}: its transform_fn cannot be saved: %s" % _unsaved(e)) from e


def _unsaved(error) -> str:
    """Why TensorFlow could not save a transform_fn, in one line: its words, or for a resource
    made outside the function (TensorFlow's "untracked" resource), what to do instead."""
    if "references an 'untracked' resource" in str(error):
        return (
            "it uses a lookup table or variable made outside it (at import?), which a SavedModel cannot hold: "
            "make it in the function, under tf.init_scope(), as TFX's census example does"
        )
    return raised_by_user_code(error)


def check_saves(fn, raw_schema, spec, calls) -> None:
    """Saves transform_fn with each analyzer's result of no values, and loads it as the map
    steps will (and what a later phase's analyzers read through), before any pass over the
    data: a function that cannot be saved (a resource it does not track) or applied (a
    variable) fails in a second, not after the passes (`saving` says why): worth it for
    inputs of more than `TRIAL_BYTES`.
    A load that fails on those results (a table of a fixed size, over a vocabulary of one
    dummy term) is left to the real one. Blocking."""
    made = tempfile.mkdtemp(prefix="tf2_mapreduce-trial-")
    try:
        with saving():
            values = analysis.results(calls, None, made)
            saved.write(fn, raw_schema, spec, calls, values, made)
            # Loaded apart, so that a load's OpError is left to the real one (SavedTransform
            # would take it for no SavedModel at all), and once.
            loaded = tf.saved_model.load(join(made, saved.TRANSFORM_FN))
            SavedTransform(join(made, saved.TRANSFORM_FN), loaded=loaded)
            # And what each later phase reads through (`saved.write_reads`), the phases before known.
            for phase in sorted({call.phase for call in calls} - {0}):
                known = [value if call.phase < phase else None for call, value in zip(calls, values)]
                names = {call.name for call in calls if call.phase == phase}
                reads = join(made, "phase-%d" % phase)
                saved.write_reads(fn, spec, calls, known, names, reads)
                SavedTransform(join(reads, saved.TRANSFORM_FN))
    except tf.errors.OpError:
        return
    finally:
        shutil.rmtree(made, ignore_errors=True)
