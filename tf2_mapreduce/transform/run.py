"""How a `Transform` (`jobs.transform`) runs: the raw schema (read, or inferred from exact
statistics: of small inputs here, else in a pass), the analyze pass, the analyzers'
results, transform_fn saved, the transform pass applying it to every example once, then
the output directory put in place whole (data/, transform_fn/, transformed_metadata/,
metadata/: the raw schema), as tft_beam's AnalyzeAndTransformDataset and WriteTransformFn.
With `transform_output`, an earlier transform's transform_fn applied alone, as
TransformDataset."""

import contextlib
import hashlib
import shutil
import tempfile

from tf2_mapreduce import log, storage
from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.jobs.stats import Stats
from tf2_mapreduce.jobs.transform import check_apart
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs import files as output
from tf2_mapreduce.outputs.directory import ResultDirectory
from tf2_mapreduce.outputs.sinks.pieces import pieces_dir
from tf2_mapreduce.paths import join
from tf2_mapreduce.run.here import run_here
from tf2_mapreduce.run.options import Options
from tf2_mapreduce.transform import analysis, early, kinds, saved
from tf2_mapreduce.transform import schema as schemas
from tf2_mapreduce.transform.applied import SavedTransform
from tf2_mapreduce.transform.materialize import materialize_job

__all__ = ["run", "feature_spec"]


def _pass_options(options, name):
    """A pass's options: each pass checkpoints in a directory of its own."""
    checkpoint_dir = options.get("checkpoint_dir")
    if not checkpoint_dir:
        return dict(options)
    return {**options, "checkpoint_dir": checkpoint_dir.rstrip("/") + "/" + name}


def fingerprint(spec, calls, computation) -> str:
    """What ties a checkpoint of a transform's passes to it: the raw features' spec, the
    analyzers by name and what the function computes from both (`computation`, a digest
    of its traced graph: a helper or constant of its module that changed changes it). A
    rerun with another of these is refused its checkpoints, as a job's with other
    parameters is; the same computation traced in another order of calls is not."""
    described = [
        sorted((name, repr(feature)) for name, feature in spec.items()),
        sorted({call.name for call in calls}),
        computation,
    ]
    return hashlib.sha256(repr(described).encode()).hexdigest()


def _comparable(value):
    if isinstance(value, kinds.VocabularyFile):
        return value.sha256
    return str(getattr(value, "dtype", "")), bytes(getattr(value, "data", b""))


def _results_digest(calls, values) -> str:
    """The analyzers' results by name, those known (not None): a later phase's checkpoint,
    and the transform pass's, are tied to them."""
    named = sorted({call.name: _comparable(v) for call, v in zip(calls, values) if v is not None}.items())
    return hashlib.sha256(repr(named).encode()).hexdigest()


def feature_spec(transform, inputs, run_pass, options):
    """The raw features' spec of `transform`, and their `Schema`: given, made of a spec
    given, or inferred from exact statistics of `inputs` where none was given (of small
    inputs read here; else in a pass, `run_pass`, the function traced over the first
    examples' schema first)."""
    if isinstance(transform.schema, dict):
        return dict(transform.schema), schemas.raw(transform.schema)
    if transform.schema is not None:
        given = schemas.read(transform.schema) if isinstance(transform.schema, str) else transform.schema
        return schemas.feature_spec(given), given
    run_options = Options.of(**options)
    statistics = _statistics_here(inputs, run_options) if run_options.on_error == "fail" else None
    if statistics is None:
        early.check_on_first_examples(
            transform.preprocessing_fn, inputs.files.paths, run_options.compression, run_options.on_error
        )
        counted = run_pass(Stats(), _pass_options(options, "schema"))
        counted.release()
        statistics = counted.total
    inferred = schemas.inferred(statistics)
    return schemas.feature_spec(inferred), inferred


def _statistics_here(inputs, options):
    """The statistics of small `inputs`, read here by the statistics job's own map function
    and collect (`run.here`): a pass of them would cost more to start than to run; the
    function is then traced over every example's schema at once (`options`: the run's
    `Options`). None where they are not small (`run.here` says which), or hold what the
    pass must report (a file it cannot read, a feature of two types): the pass then runs,
    under `on_error`."""
    try:
        collected = run_here(Stats(), inputs.files, options.compression, options.read_size)
    except tf.errors.OpError:
        return None
    if collected is None or collected.problems:
        return None
    return collected.total


def run(transform, run_pass, inputs, output_dir=None, claimed=None, **options):
    """The runner of `Transform` (its `RUNNER`, a `run.passes.Passes`): runs `transform`
    over `inputs` (an `inputs.files.Inputs`, listed) and writes
    `output_dir` (`claimed`: its `ResultDirectory`, already claimed): the raw schema
    (inferred where not given: `feature_spec`), the analyze pass, then the transform
    pass, each exactly-once and resumable from its checkpoint; the directory holds the
    previous result until the new one is whole. `run_pass(job, options)` runs each pass to
    its `Result` (`options` and the pass's own). Returns the transform pass's `Result`, its
    `written` the summary written. Blocking."""
    if not output_dir:
        raise UsageError("a Transform writes its output: give it an output directory ({setting:output_dir})")
    if transform.transform_output:
        check_apart(transform.transform_output, output_dir)
    if claimed is None:  # claimed before any pass: the map steps write into it as they run
        with ResultDirectory(output_dir) as claimed:
            return run(transform, run_pass, inputs, output_dir, claimed, **options)
    pass_ = dict(transform=transform, run_pass=run_pass, output_dir=output_dir, claimed=claimed, options=options)
    if transform.transform_output:
        return _apply_earlier(pass_)
    spec, raw_schema = feature_spec(transform, inputs, run_pass, options)
    fn = transform.preprocessing_fn
    traced = analysis.trace_calls(fn, spec)
    calls = traced.calls
    options = pass_["options"] = _resumable_options(traced, options)
    if inputs.total_bytes > early.TRIAL_BYTES:
        early.check_saves(fn, raw_schema, spec, calls)
    identity = {"preprocessing_fn": fingerprint(spec, calls, traced.computation)}
    values = [None] * len(calls)
    # The vocabularies' files, written as their terms are sorted, live here until saved.
    with _worker_files(output_dir), tempfile.TemporaryDirectory(prefix="tf2_mapreduce-results-") as results:
        for phase in range(traced.phases):
            # A phase's counts depend on the results of those before: its checkpoint is tied to them.
            config = {**identity, "analyzers": _results_digest(calls, values)} if phase else identity
            with tempfile.TemporaryDirectory(prefix="tf2_mapreduce-phase-") as made:
                if phase == 0:
                    read, reading = traced.first_phase(), None
                else:
                    read, reading = _later_phase(fn, spec, calls, values, phase, made, output_dir)
                job = analysis.analyze_job(read, spec, "%s-analyze%s" % (transform.name, phase or ""), config)
                try:
                    counted = run_pass(job, _pass_options(options, "analyze%s" % (phase or "")))
                finally:
                    if reading is not None:
                        reading.release()
            of_phase = [index for index, call in enumerate(calls) if call.phase == phase]
            found = analysis.results([calls[i] for i in of_phase], counted, results)
            counted.release()  # a key per distinct value, on the ps tasks: not needed by the next pass
            for index, value in zip(of_phase, found):
                values[index] = value
        identity["analyzers"] = _results_digest(calls, values)
        made = tempfile.mkdtemp(prefix="tf2_mapreduce-transform-")
        try:
            # Saved first, then applied: what writes data/ is the transform_fn written beside it.
            with early.saving():
                vocabularies = saved.write(fn, raw_schema, spec, calls, values, made)
                applied = SavedTransform(join(made, saved.TRANSFORM_FN), files_into=_files_into(output_dir))
            summary = {"vocabularies": vocabularies}
            return _transform_pass(applied, spec, identity, (made, saved.WRITTEN), summary, **pass_)
        finally:
            shutil.rmtree(made, ignore_errors=True)


def _resumable_options(traced, options) -> dict:
    """`options`, but for a function no other process could resume (`traced.resumable`):
    then without a checkpoint directory, which it says."""
    if traced.resumable or not options.get("checkpoint_dir"):
        return options
    log.warning(
        "{setting:preprocessing_fn} computes what its trace cannot tell from another process's (a lookup table "
        "it writes, fills from a file of its own, passes into a tf.map_fn or tf.cond, or did not make in this "
        "trace; a variable; an unseeded random op; a Python function; a file it reads): another process could "
        "not resume this run, so its passes keep no checkpoint"
    )
    return {**options, "checkpoint_dir": None}


def _files_into(output_dir) -> str:
    """Where the vocabularies a pass's map steps apply are copied for the workers to read:
    in the output directory, which every worker reaches, with the pieces."""
    return join(pieces_dir(output_dir), "vocabularies")


@contextlib.contextmanager
def _worker_files(output_dir):
    """Removes the copies of `_files_into` on leaving, whatever happened: made again by
    each run (a resume too), they are no part of what a failed run leaves to the next.
    Blocking."""
    try:
        yield
    finally:
        output.remove_tree(_files_into(output_dir))  # none made, or removed with the pieces


def _later_phase(fn, spec, calls, values, phase, directory, output_dir):
    """What the analyzers of `phase` (after the first) read (an `analysis.Phase`), and the
    `SavedTransform` it applies, to be released after its pass: `fn` saved into `directory`
    giving it, with the results of the phases before (`values`) built in
    (`saved.write_reads`), and loaded to be applied in the map steps as transform_fn is."""
    of_phase = {call.name: call for call in calls if call.phase == phase}
    with early.saving():
        saved.write_reads(fn, spec, calls, values, of_phase, directory)
        reading = SavedTransform(join(directory, saved.TRANSFORM_FN), files_into=_files_into(output_dir))
    names = sorted(of_phase)

    def read(features):
        applied = reading.apply(features, names)
        return [applied[name] for name in names]

    # Every raw feature parsed, as the transform pass does: what a call reads may wait, through
    # control edges, for a lookup in the same table of a feature it does not compute from.
    return analysis.Phase(of_phase, tuple(sorted(spec)), read), reading


def _transform_pass(applied, spec, identity, copied, summary, transform, run_pass, output_dir, claimed, options):
    """The transform pass: `applied` (a `SavedTransform`) to every example, parsed as `spec`
    says, written into `output_dir` with the directories `copied` (source, names) beside
    data/; its `Result`, `written` the summary written (`summary` added)."""
    transformed = schemas.read(join(copied[0], saved.METADATA + "/schema.pbtxt"))
    sparse = {f.name: ([i.name for i in f.index_feature], f.value_feature.name) for f in transformed.sparse_feature}
    # How each output is written is part of what a checkpoint of the pass is tied to.
    identity = {**identity, "sparse_features": repr(sorted(sparse.items()))}
    job = materialize_job(applied, spec, transform.num_shards, transform.name, identity, sparse)
    try:
        result = run_pass(job, {**_pass_options(options, "transform"), "output_dir": output_dir})
    finally:
        applied.release()

    def also(staging):
        # Safe to repeat through an outage of the storage: the same files, copied again.
        storage.retrying(lambda: saved.copy(*copied, target=staging), staging)
        return summary

    result.written = result.write_dir(output_dir, also=also, claimed=claimed)
    return result


def _apply_earlier(pass_):
    """The transform pass alone (`pass_`: `_transform_pass`'s arguments): the transform_fn
    of the transform's `transform_output` applied to every example, over the raw schema
    written beside it; the output gets data/ and a copy of its transformed_metadata/."""
    earlier = pass_["transform"].transform_output
    raw_schema = join(earlier, schemas.RAW_SCHEMA)
    if not storage.retrying(lambda: tf.io.gfile.exists(raw_schema), raw_schema):
        raise UsageError(
            "{setting:transform_output} %s: no %s: not the output of a transform" % (earlier, schemas.RAW_SCHEMA)
        )
    spec = schemas.feature_spec(schemas.read(raw_schema))
    with _worker_files(pass_["output_dir"]):
        applied = SavedTransform(join(earlier, saved.TRANSFORM_FN), files_into=_files_into(pass_["output_dir"]))
        identity = {"transform_fn": applied.digest, "raw": fingerprint(spec, [], "")}
        copied = (earlier, [saved.METADATA])
        return _transform_pass(applied, spec, identity, copied, {"transform_fn": earlier}, **pass_)
