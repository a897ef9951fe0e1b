"""TFX's example pipelines as their users have them: each one's module file read from TFX's own
wheel, its preprocessing_fn run with the import line changed, over the data TFX ships beside it.

The compat tier (tests/compat/test_pipelines_tft.py) runs each on both sides: tf.Transform's venv
runs the module as TFX does; ours runs it with `import tensorflow_transform as tft` made
`import tf2_mapreduce.transform as tft`, nothing else. The wheel is a download of the registry
(`scripts/install_peers.py` fetches it beside tf.Transform's venv): not installed, so none of
TFX's dependencies come with it. A module's imports that do not import here (TFX's own, tfx_bsl's:
the trainer's) are left out; its preprocessing_fn, helpers and constants run as written.

Each pipeline writes, under a work directory, the layout scripts/compare_tft.py reads: raw/ (the
split analyzed), eval/ (another split), raw_schema.pbtxt.
"""

import __future__

import ast
import csv
import importlib.util
import io
import os
import shutil
import types
import zipfile
from typing import NamedTuple

__all__ = ["PIPELINES", "Pipeline", "make_fn", "write_pipeline_data"]

TFT_IMPORT = "import tensorflow_transform as tft"
TAXI = "tfx/examples/chicago_taxi_pipeline/"
PENGUIN = "tfx/components/testdata/penguin/"
IMDB = "tfx/examples/imdb/"
TAXI_Z = {"trip_miles_xf": "trip_miles", "fare_xf": "fare", "trip_seconds_xf": "trip_seconds"}
PENGUIN_Z = {k + "_xf": k for k in ("culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g")}


class Pipeline(NamedTuple):
    module: str  # the module file in the wheel
    data: str  # how its raw examples are made: a key of WRITERS
    z_scores: dict  # its outputs that are scale_to_z_score of a raw feature: {output: feature}


PIPELINES = {
    "taxi": Pipeline(TAXI + "taxi_utils_native_keras.py", "taxi", TAXI_Z),
    # The airflow workshop's (and TFX's components tutorial's) taxi: one-hots as deep as a vocabulary.
    "taxi_workshop": Pipeline("tfx/examples/airflow_workshop/taxi/setup/dags/taxi_utils.py", "taxi", TAXI_Z),
    "penguin": Pipeline("tfx/examples/penguin/penguin_utils_base.py", "penguin", PENGUIN_Z),
    "imdb": Pipeline(IMDB + "imdb_utils_native_keras.py", "imdb", {}),
    "mnist": Pipeline("tfx/examples/mnist/mnist_utils_native_keras_base.py", "mnist", {}),
}
SHARDS = 2


def _importable(node):
    """Whether a top-level import statement's modules import in this Python."""
    names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module]
    return all(importlib.util.find_spec(name.split(".")[0]) is not None for name in names)


def module_source(wheel, name):
    """The text of pipeline `name`'s module file, as TFX ships it in `wheel`."""
    with zipfile.ZipFile(wheel) as z:
        return z.read(PIPELINES[name].module).decode()


def make_fn(name, wheel):
    """A `make_fn(tft)` for benchmarks/tf_transform.run_tft and the compat tier: pipeline
    `name`'s preprocessing_fn, its module executed with `tft` as its tf.Transform (the import
    line changed to import `tft`'s module where that is not tensorflow_transform)."""

    def make(tft):
        source = module_source(wheel, name)
        if TFT_IMPORT not in source:
            raise ValueError("%s: no line %r to change" % (PIPELINES[name].module, TFT_IMPORT))
        source = source.replace(TFT_IMPORT, "import %s as tft" % tft.__name__, 1)
        tree = ast.parse(source)
        tree.body = [
            node for node in tree.body if not isinstance(node, (ast.Import, ast.ImportFrom)) or _importable(node)
        ]
        module = types.ModuleType("tfx_example_" + name)
        # Annotations unevaluated: the trainer's signatures name the classes of the imports left out.
        code = compile(tree, PIPELINES[name].module, "exec", flags=__future__.annotations.compiler_flag)
        exec(code, module.__dict__)
        return module.preprocessing_fn

    return make


def _example(features, schema_types):
    """A tf.train.Example of {name: [values]} (a name with no values left out, as a CSV's empty
    cell is), each by its schema type."""
    import tensorflow as tf

    feature = {}
    for name, values in features.items():
        if not values:
            continue
        kind = schema_types[name]
        if kind == "FLOAT":
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(v) for v in values]))
        elif kind == "INT":
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))
        else:
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in values]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _schema_types(schema_text):
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = text_format.Parse(schema_text, schema_pb2.Schema())
    return {f.name: schema_pb2.FeatureType.Name(f.type) for f in schema.feature}


def _write_splits(work, schema_text, records):
    """raw/ (two of every three records, in order) and eval/ (the third), GZIP'd TFRecord
    shards, and the schema: the 2:1 split of TFX's ExampleGen."""
    import tensorflow as tf

    with open(os.path.join(work, "raw_schema.pbtxt"), "w") as f:
        f.write(schema_text)
    splits = {"raw": [r for i, r in enumerate(records) if i % 3 != 2], "eval": records[2::3]}
    for split, chosen in splits.items():
        os.makedirs(os.path.join(work, split), exist_ok=True)
        for shard in range(SHARDS):
            path = os.path.join(work, split, "part-%05d.tfrecord.gz" % shard)
            with tf.io.TFRecordWriter(path, options="GZIP") as writer:
                for record in chosen[shard * len(chosen) // SHARDS : (shard + 1) * len(chosen) // SHARDS]:
                    writer.write(record)


def _csv_records(text, schema_text):
    types_ = _schema_types(schema_text)
    rows = list(csv.DictReader(io.StringIO(text)))
    return [_example({k: [v] if v != "" else [] for k, v in row.items()}, types_) for row in rows]


def _taxi(work, z):
    """TFX's Chicago taxi trips (its CSV, 15,002 trips, as CsvExampleGen reads it: an empty
    cell a missing feature) with the schema TFX's taxi pipeline is given."""
    schema = z.read(TAXI + "data/user_provided_schema/schema.pbtxt").decode()
    _write_splits(work, schema, _csv_records(z.read(TAXI + "data/simple/data.csv").decode(), schema))


def _penguin(work, z):
    """TFX's penguin examples and schema, as TFX's own tests have them (its splits as they are)."""
    with open(os.path.join(work, "raw_schema.pbtxt"), "wb") as f:
        f.write(z.read(PENGUIN + "schema/schema.pbtxt"))
    for split, name in (("raw", "Split-train"), ("eval", "Split-eval")):
        os.makedirs(os.path.join(work, split), exist_ok=True)
        member = PENGUIN + "data/%s/data_tfrecord-00000-of-00001.gz" % name
        with z.open(member) as src, open(os.path.join(work, split, "part-00000.tfrecord.gz"), "wb") as dst:
            shutil.copyfileobj(src, dst)


IMDB_SCHEMA = """\
feature { name: "label" type: INT presence { min_fraction: 1.0 } shape {} }
feature { name: "text" type: BYTES presence { min_fraction: 1.0 } shape {} }
"""


def _imdb(work, z):
    """TFX's 100 labelled IMDB reviews (its CSV), with the schema SchemaGen infers of them."""
    _write_splits(
        work, IMDB_SCHEMA, _csv_records(z.read(IMDB + "data/imdb_small_with_labels.txt").decode(), IMDB_SCHEMA)
    )


MNIST_SCHEMA = """\
feature { name: "image_floats" type: FLOAT presence { min_fraction: 1.0 } shape { dim { size: 784 } } }
feature { name: "image_class" type: INT presence { min_fraction: 1.0 } shape {} }
"""
MNIST_IMAGES = 600


def _mnist(work, z):
    """Images of MNIST's form (TFX does not ship its data): 784 pixels of k/255 - 0.5, a class
    0-9, drawn from a fixed seed."""
    import random

    rng = random.Random(0)
    types_ = _schema_types(MNIST_SCHEMA)
    records = []
    for _ in range(MNIST_IMAGES):
        pixels = [repr(rng.choice((0, 0, 0, rng.randrange(256))) / 255 - 0.5) for _ in range(784)]
        records.append(_example({"image_floats": pixels, "image_class": [str(rng.randrange(10))]}, types_))
    _write_splits(work, MNIST_SCHEMA, records)


WRITERS = {"taxi": _taxi, "penguin": _penguin, "imdb": _imdb, "mnist": _mnist}


def write_pipeline_data(name, wheel, work):
    """Writes pipeline `name`'s raw examples (raw/, eval/) and schema under `work`."""
    os.makedirs(work, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        WRITERS[PIPELINES[name].data](work, z)
