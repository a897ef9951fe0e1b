"""`Transform`: tf.Transform's analyze-and-transform as a job of tf2_mapreduce, and how it
runs: the analyze pass, the analyzers' results, the transform pass writing every example
once, then the output directory put in place whole (data/, transform_fn/,
transformed_metadata/), as tft_beam's AnalyzeAndTransformDataset and WriteTransformFn."""

from collections.abc import Callable
from dataclasses import dataclass

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.transform import analysis, saved
from tf2_mapreduce.transform import schema as schemas
from tf2_mapreduce.transform.materialize import materialize_job

__all__ = ["Transform", "run"]


@dataclass(frozen=True)
class Transform:
    """A `preprocessing_fn` (a function of a dict of raw features, written against
    `tf2_mapreduce.transform`) over tf.train.Example records whose `schema` is a path to a
    tensorflow-metadata Schema in text format, a `Schema`, or a feature spec ({name:
    tf.io.FixedLenFeature | tf.io.VarLenFeature}); its examples written in `num_shards`
    files (0: by size)."""

    preprocessing_fn: Callable
    schema: object
    num_shards: int = 0
    name: str = "transform"

    def feature_spec(self) -> dict:
        if isinstance(self.schema, dict):
            return dict(self.schema)
        return schemas.feature_spec(schemas.read(self.schema) if isinstance(self.schema, str) else self.schema)


def _pass_options(options, name):
    """A pass's options: each pass checkpoints in a directory of its own."""
    checkpoint_dir = options.get("checkpoint_dir")
    if not checkpoint_dir:
        return dict(options)
    return {**options, "checkpoint_dir": checkpoint_dir.rstrip("/") + "/" + name}


def run(cluster, transform, inputs, on_progress=None, output_dir=None, **options):
    """Runs `transform` over `inputs` on `cluster` and writes `output_dir`: the analyze pass,
    then the transform pass, both exactly-once and resumable from their checkpoints; the
    directory holds the previous result until the new one is whole. Returns the transform
    pass's `Result`, its `written` the summary written. Blocking."""
    if not output_dir:
        raise UsageError("a Transform writes its output: give it an output directory ({setting:output_dir})")
    spec = transform.feature_spec()
    calls = analysis.trace_calls(transform.preprocessing_fn, spec)
    counted = cluster.run(
        analysis.analyze_job(transform.preprocessing_fn, spec, calls, transform.name + "-analyze"),
        inputs,
        on_progress=on_progress,
        **_pass_options(options, "analyze"),
    )
    values = analysis.results(calls, analysis.counts_of(counted))
    job = materialize_job(transform.preprocessing_fn, spec, calls, values, transform.num_shards, transform.name)
    result = cluster.run(
        job, inputs, on_progress=on_progress, output_dir=output_dir, **_pass_options(options, "transform")
    )

    def also(staging):
        return {"vocabularies": saved.write(transform.preprocessing_fn, spec, calls, values, staging)}

    result.written = result.write_dir(output_dir, also=also)
    return result
