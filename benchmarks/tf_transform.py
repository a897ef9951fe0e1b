"""The tf.Transform side, run with the Python of tf.Transform's venv: its Beam pipeline (also
scripts/compare_tft.py's and tests/compat's) and the transform part's preprocessing_fn."""

import os
import sys
from collections.abc import Callable

__all__ = ["USAGE", "preprocessing_fn", "run_tft"]

USAGE = """\
python -m benchmarks.tf_transform --input 'DIR/*.tfrecord.gz' --schema S --output_dir OUT [--make_fn M:F]
  tf.Transform's side of the transform part alone (the bench runs it so, with --tft_python);
  with --make_fn, the preprocessing_fn that F of module M makes of tensorflow_transform."""


def preprocessing_fn(tft, embedding: bool = True) -> Callable[[dict], dict]:
    """The preprocessing_fn of both sides, written against `tft` (tensorflow_transform, or
    tf2_mapreduce.transform): every analyzer kind, as a search log's trainer would use them;
    the embedding passed through, where the examples hold one (`embedding`)."""
    import tensorflow as tf

    def fn(inputs):
        outputs = {
            "query_id": tft.compute_and_apply_vocabulary(inputs["query"], top_k=10_000, num_oov_buckets=1),
            "tags_id": tft.compute_and_apply_vocabulary(inputs["tags"]),
            "user_bucket": tft.bucketize(inputs["user_id"], 10),
            "clicks_z": tft.scale_to_z_score(inputs["clicks"]),
            "score_01": tft.scale_to_0_1(inputs["score"]),
        }
        if embedding:
            outputs["embedding"] = inputs["embedding"] + tf.zeros([], tf.float32)
        return outputs

    return fn


def run_tft(
    pattern: str,
    schema_path: str,
    output_dir: str,
    make_fn: Callable = preprocessing_fn,
    runner: str = "DirectRunner",
    batch_size: int | None = None,
    eval_pattern: str | None = None,
) -> None:
    """tf.Transform's side, in its venv: analyze and transform with `make_fn(tft)`, the
    transform written, the examples encoded and written as GZIP'd TFRecord files of
    `output_dir`/data. Beam 2.77's DirectRunner tries Prism first, a binary it downloads,
    then runs the FnApiRunner where the download fails: `runner="FnApiRunner"` runs that one
    without the attempt. The record batches are `batch_size` examples, or Beam's by how fast
    they go: tf.Transform's mean and variance combine float32 statistics of each batch, so
    only a fixed size repeats them to the bit. `eval_pattern`: another split, transformed by
    the same transform_fn (TransformDataset) into `output_dir`/eval/data."""
    import apache_beam as beam
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2
    from tfx_bsl.coders import example_coder
    from tfx_bsl.public import tfxio

    with open(schema_path) as f:
        schema = text_format.Parse(f.read(), schema_pb2.Schema())
    source = tfxio.TFExampleRecord(file_pattern=pattern, schema=schema)
    with beam.Pipeline(runner=runner) as pipeline:
        with tft_beam.Context(temp_dir=os.path.join(output_dir, "tmp")):
            raw = pipeline | "Read" >> source.BeamSource(batch_size)
            (data, metadata), transform_fn = (
                raw,
                source.TensorAdapterConfig(),
            ) | tft_beam.AnalyzeAndTransformDataset(make_fn(tft), output_record_batches=True)
            _ = transform_fn | tft_beam.WriteTransformFn(output_dir)
            encoder = example_coder.RecordBatchToExamplesEncoder(metadata.schema)
            splits = [("", data)]
            if eval_pattern:
                eval_source = tfxio.TFExampleRecord(file_pattern=eval_pattern, schema=schema)
                eval_raw = pipeline | "ReadEval" >> eval_source.BeamSource(batch_size)
                (eval_data, _) = (
                    (eval_raw, eval_source.TensorAdapterConfig()),
                    transform_fn,
                ) | tft_beam.TransformDataset(output_record_batches=True)
                splits.append(("eval", eval_data))
            for split, batches in splits:
                _ = (
                    batches
                    | "Encode" + split >> beam.FlatMap(lambda batch: encoder.encode(batch[0]))
                    | "Write" + split
                    >> beam.io.WriteToTFRecord(
                        os.path.join(output_dir, split, "data", "part"), file_name_suffix=".tfrecord.gz"
                    )
                )


def main(argv: list[str]) -> None:
    flags = dict(zip(argv[1::2], argv[2::2]))
    if sorted(set(flags) - {"--make_fn"}) != ["--input", "--output_dir", "--schema"]:
        sys.exit(USAGE)
    make_fn = preprocessing_fn
    if "--make_fn" in flags:
        import importlib

        module, _, name = flags["--make_fn"].partition(":")
        make_fn = getattr(importlib.import_module(module), name)
    run_tft(flags["--input"], flags["--schema"], flags["--output_dir"], make_fn=make_fn)


if __name__ == "__main__":
    main(sys.argv)
