"""bench.py's "transform" part: one preprocessing_fn over the tf.Example part's shards, our
`--job=transform` (a process per task) against tf.Transform 1.21's AnalyzeAndTransformDataset
and WriteTransformFn on Beam's DirectRunner, its examples encoded and written as tf.Examples
(in a venv of its own: `--tft_python`). Both read the same schema; the examples each wrote
must agree.

    python scripts/bench_transform.py --side tft --input 'DIR/*.tfrecord.gz' --schema S --output_dir OUT

runs the tf.Transform side alone (bench.py runs it so, with the tf.Transform venv's Python).
"""

import os
import sys

# make_examples.py's features, as their schema: score and the embedding in every example,
# one value and 64; the others missing from some examples, or lists.
SCHEMA = """\
feature { name: "query" type: BYTES }
feature { name: "tags" type: BYTES }
feature { name: "user_id" type: INT }
feature { name: "clicks" type: INT }
feature { name: "score" type: FLOAT presence { min_fraction: 1.0 } shape { dim { size: 1 } } }
feature { name: "embedding" type: FLOAT presence { min_fraction: 1.0 } shape { dim { size: 64 } } }
"""
MODULE = "bench_transform_fn"  # the module the coordinator imports: preprocessing_fn against ours


def preprocessing_fn(tft):
    """The preprocessing_fn of both sides, written against `tft` (tensorflow_transform, or
    tf2_mapreduce.transform): every analyzer kind, as a search log's trainer would use them."""
    import tensorflow as tf

    def fn(inputs):
        return {
            "query_id": tft.compute_and_apply_vocabulary(inputs["query"], top_k=10_000, num_oov_buckets=1),
            "tags_id": tft.compute_and_apply_vocabulary(inputs["tags"]),
            "user_bucket": tft.bucketize(inputs["user_id"], 10),
            "clicks_z": tft.scale_to_z_score(inputs["clicks"]),
            "score_01": tft.scale_to_0_1(inputs["score"]),
            "embedding": inputs["embedding"] + tf.zeros([], tf.float32),
        }

    return fn


def prepare(directory):
    """Writes the schema, and the module of our side's preprocessing_fn, into `directory`;
    returns the schema's path and the PYTHONPATH that finds the module."""
    os.makedirs(directory, exist_ok=True)
    schema = os.path.join(directory, "raw_schema.pbtxt")
    with open(schema, "w") as f:
        f.write(SCHEMA)
    with open(os.path.join(directory, MODULE + ".py"), "w") as f:
        f.write("import tf2_mapreduce.transform as tft\nfrom bench_transform import preprocessing_fn as of\n\n")
        f.write("preprocessing_fn = of(tft)\n")
    return schema, os.pathsep.join([directory, os.path.dirname(os.path.abspath(__file__))])


def ours_command(listing, schema, output_dir):
    """Our side: the default command with a process per task."""
    return [sys.executable, "-m", "tf2_mapreduce.coordinator", "--job=transform"] + [
        "--preprocessing_fn=%s:preprocessing_fn" % MODULE,
        "--schema=" + schema,
        "--input",
        "@" + listing,
        "--output_dir",
        output_dir,
        "--progress_every=60",
        "--local_cluster=processes",
    ]


def tft_command(tft_python, pattern, schema, output_dir):
    """tf.Transform's side: this file run with `tft_python`, a Python of tf.Transform's venv."""
    return [tft_python, os.path.abspath(__file__), "--side", "tft", "--input", pattern] + [
        "--schema",
        schema,
        "--output_dir",
        output_dir,
    ]


def run_tft(pattern, schema_path, output_dir, make_fn=preprocessing_fn, runner="DirectRunner", batch_size=None):
    """tf.Transform's side, in its venv: analyze and transform with `make_fn(tft)`, the
    transform written, the examples encoded and written as GZIP'd TFRecord files of
    `output_dir`/data (scripts/compare_tft.py's and tests/compat's side too). Beam 2.77's
    DirectRunner tries Prism first, a binary it downloads, then runs the FnApiRunner where
    the download fails: `runner="FnApiRunner"` runs that one without the attempt. The record
    batches are `batch_size` examples, or Beam's by how fast they go: tf.Transform's mean and
    variance combine float32 statistics of each batch, so only a fixed size repeats them to the bit."""
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
            _ = (
                data
                | "Encode" >> beam.FlatMap(lambda batch: encoder.encode(batch[0]))
                | "Write"
                >> beam.io.WriteToTFRecord(os.path.join(output_dir, "data", "part"), file_name_suffix=".tfrecord.gz")
            )


def count_records(directory):
    """The records of the GZIP'd TFRecord files under `directory`/data, counted by their
    length fields (each file one GZIP stream, or several: Python's gzip reads both)."""
    import glob
    import gzip
    import struct

    count = 0
    for path in glob.glob(os.path.join(directory, "data", "*")):
        with gzip.open(path, "rb") as f:
            while header := f.read(12):
                (length,) = struct.unpack("<Q", header[:8])
                f.seek(length + 4, 1)
                count += 1
    return count


def main(argv):
    flags = dict(zip(argv[1::2], argv[2::2]))
    if flags.get("--side") != "tft":
        sys.exit(__doc__)
    run_tft(flags["--input"], flags["--schema"], flags["--output_dir"])


if __name__ == "__main__":
    main(sys.argv)
