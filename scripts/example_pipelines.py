"""The example pipelines of TFX and tf.Transform as their users have them: each module file (or
notebook) run with only its import line changed, over the data TFX ships beside it (or made in
its shape).

The compat tier (tests/compat/test_pipelines_tft.py) runs each on both sides, loaded alike
(`load_module`): tf.Transform's venv with the module's import of tf.Transform as written; ours
with `import tensorflow_transform as tft` made `import tf2_mapreduce.transform as tft`, nothing
else. TFX's modules are read from TFX's wheel, a download of the registry
(`scripts/install_peers.py` fetches it beside tf.Transform's venv): not installed, so none of
TFX's dependencies come with it. tf.Transform's examples and TFX's census tutorial are copies
(tests/compat/published). A module's imports that do not import in a venv (TFX's own, and on
ours tfx_bsl's and Beam's: the trainer's and the pipeline's) are left out, with the statements
that read them as the module is imported; its preprocessing_fn, helpers and constants run as
written, and one defined inside another function (tf.Transform's examples define theirs inside
the Beam pipeline's) is taken out of it as it is.

Each pipeline writes, under a work directory, the layout scripts/compare_tft.py reads: raw/ (the
split analyzed), eval/ (another split), raw_schema.pbtxt.
"""

import __future__

import ast
import csv
import importlib.util
import io
import json
import linecache
import os
import shutil
import symtable
import types
import zipfile
from typing import NamedTuple

import compare_tft

__all__ = ["PIPELINES", "Pipeline", "load_module", "make_fn", "module_schema", "module_source", "write_pipeline_data"]

TFT_IMPORT = "import tensorflow_transform as tft"
# tf.Transform's examples and TFX's census tutorial: copies (no package holds them).
PUBLISHED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "compat", "published")
TAXI = "tfx/examples/chicago_taxi_pipeline/"
PENGUIN = "tfx/components/testdata/penguin/"
IMDB = "tfx/examples/imdb/"


def _z_scores(outputs):
    """Oracles of outputs that are scale_to_z_score of a raw feature ({output: feature})."""
    return {
        output: ([feature], lambda columns, feature=feature: compare_tft.exact_z_scores(columns[feature]))
        for output, feature in outputs.items()
    }


TAXI_Z = _z_scores({"trip_miles_xf": "trip_miles", "fare_xf": "fare", "trip_seconds_xf": "trip_seconds"})
PENGUIN_FEATURES = ("culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g")
PENGUIN_Z = _z_scores({k + "_xf": k for k in PENGUIN_FEATURES})
# The simple example's: x less its mean, and times y scaled to [0, 1].
SIMPLE = {
    "x_centered": (["x"], lambda c: compare_tft.exact_centered(c["x"])),
    "x_centered_times_y_normalized": (
        ["x", "y"],
        lambda c: compare_tft.exact_centered(c["x"]) * compare_tft.scaled_0_1(c["y"]),
    ),
}


class Pipeline(NamedTuple):
    module: str  # its module file (or notebook): in TFX's wheel ("tfx/..."), or one of PUBLISHED
    data: str  # how its raw examples are made: a key of WRITERS
    # Its float outputs whose analyzers tf.Transform combines in float32, each with an exact
    # oracle: {output: (raw features, a function of their columns (compare_tft.raw_columns))}.
    oracles: types.MappingProxyType = types.MappingProxyType({})
    fn: str = "preprocessing_fn"  # the function's name in the module
    schema: str | None = None  # the module's attribute holding its raw schema, if it makes one


PIPELINES = {
    "taxi": Pipeline(TAXI + "taxi_utils_native_keras.py", "taxi", TAXI_Z),
    # The airflow workshop's (and TFX's components tutorial's) taxi: one-hots as deep as a vocabulary.
    "taxi_workshop": Pipeline("tfx/examples/airflow_workshop/taxi/setup/dags/taxi_utils.py", "taxi", TAXI_Z),
    "penguin": Pipeline("tfx/examples/penguin/penguin_utils_base.py", "penguin", PENGUIN_Z),
    "imdb": Pipeline(IMDB + "imdb_utils_native_keras.py", "imdb"),
    "mnist": Pipeline("tfx/examples/mnist/mnist_utils_native_keras_base.py", "mnist"),
    "tft_simple": Pipeline("simple_example.py", "simple", SIMPLE, fn="_preprocessing_fn", schema="_RAW_DATA_METADATA"),
    # RaggedFeature in, SparseFeature out, a table made under tf.init_scope().
    "tft_census_v2": Pipeline("census_example_v2.py", "census", schema="_SCHEMA"),
    # tfidf over a vocabulary's ids, over TFX's IMDB reviews.
    "tft_sentiment_v2": Pipeline("sentiment_example_v2.py", "sentiment", schema="SCHEMA"),
    # TFX's tf.Transform census tutorial: a notebook.
    "tfx_census_tutorial": Pipeline("census.ipynb", "census", schema="SCHEMA"),
}


def _importable(node):
    """Whether a top-level import statement's modules import in this Python."""
    if isinstance(node, ast.ImportFrom) and node.level:
        return False  # of the package the module was in: not here
    names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module]
    return all(importlib.util.find_spec(name.split(".")[0]) is not None for name in names)


def _evaluated(node):
    """What of a top-level statement runs when the module is imported: a definition's
    decorators and defaults; any other statement whole."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.decorator_list + node.args.defaults + [d for d in node.args.kw_defaults if d]
    if isinstance(node, ast.ClassDef):
        return node.decorator_list + node.bases + [k.value for k in node.keywords]
    return [node]


def _names(parts):
    """Every name the expressions or statements `parts` mention."""
    return {n.id for part in parts for n in ast.walk(part) if isinstance(n, ast.Name)}


def _binds(node):
    """The names a top-level statement binds."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _without_left_out(body, path):
    """`body` without the imports that do not import here, nor the statements that would read
    their names when the module is imported (the Beam pipeline's transforms, decorated by Beam).
    Raises ValueError where a statement left out binds a name that the rest binds or reads as
    it is imported: the module would then run otherwise than as written."""
    kept, left_out, missing = [], [], set()
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not _importable(node):
            missing |= _binds(node)
            continue
        reads = _names(_evaluated(node))
        (left_out if reads & missing else kept).append(node)
    # What runs as the module is imported, and what it binds: a statement left out that binds
    # one of these would leave another value in place. A function calling one fails loudly.
    used = {name for node in kept for name in _names(_evaluated(node))}
    used |= {name for node in kept for name in _binds(node)}
    for node in left_out:
        if _binds(node) & used:
            raise ValueError(
                "%s:%d: %s, left out, is bound or read by what runs"
                % (path, node.lineno, ", ".join(sorted(_binds(node) & used)))
            )
    return kept


def _with_tft(tree, tft, path):
    """`tree` with its one `import tensorflow_transform as tft` statement importing `tft`'s
    module: the one line a user changes. Raises ValueError unless there is exactly one."""
    found = [
        alias
        for node in tree.body
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "tensorflow_transform" and alias.asname == "tft"
    ]
    if len(found) != 1:
        raise ValueError("%s: %d statements %r, not one" % (path, len(found), TFT_IMPORT))
    found[0].name = tft.__name__
    return tree


def module_source(wheel, name, before=None):
    """The text of pipeline `name`'s module file, as TFX ships it in `wheel` or as copied in
    PUBLISHED; of a notebook, its code cells one after the other, without their shell and
    magic lines (`!pip ...`), and without the cells of a cell magic (`%%writefile`). With
    `before`, a notebook's cells up to its first heading that holds `before`."""
    path = PIPELINES[name].module
    if path.startswith("tfx/"):
        with zipfile.ZipFile(wheel) as z:
            return z.read(path).decode()
    with open(os.path.join(PUBLISHED, path)) as f:
        if not path.endswith(".ipynb"):
            return f.read()
        cells, found = [], not before
        for cell in json.load(f)["cells"]:
            # nbformat allows a cell's source as one string or as its lines.
            lines = cell["source"].splitlines(True) if isinstance(cell["source"], str) else cell["source"]
            if cell["cell_type"] == "code":
                cells.append(lines)
            elif before and any(line.startswith("#") and before in line for line in lines):
                found = True
                break
    if not found:
        raise ValueError("%s: no heading holds %r" % (path, before))
    # A cell of a cell magic (%%writefile, %%bash) is not Python the notebook runs; of the
    # others, a line of the shell or a line magic (!pip, %matplotlib) is not either.
    code = [
        "".join(line for line in cell if not line.startswith(("!", "%")))
        for cell in cells
        if not cell or not cell[0].startswith("%%")
    ]
    return "\n\n".join(code) + "\n"


def _reads(node):
    """The module-level names a statement reads (symtable's: not the parameters and locals of
    what it defines, nor a comprehension's own names)."""
    module = symtable.symtable(ast.unparse(node), "cell", "exec")
    reads = {symbol.get_name() for symbol in module.get_symbols() if symbol.is_referenced()}
    tables = module.get_children()
    while tables:
        table = tables.pop()
        reads |= {symbol.get_name() for symbol in table.get_symbols() if symbol.is_global() and symbol.is_referenced()}
        tables += table.get_children()
    return reads


# What has a scope of its own: what it binds inside is its own.
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp)
SCOPES += (ast.GeneratorExp,)


def _outside_definitions(node):
    """The nodes of a statement that run where it stands, in its scope: of a definition, its
    decorators and defaults; not the insides of what has a scope of its own."""
    pending = list(_evaluated(node)) if isinstance(node, SCOPES) else [node]
    while pending:
        at = pending.pop()
        yield at
        if not isinstance(at, SCOPES):
            pending += ast.iter_child_nodes(at)


def _touches(node, modules):
    """The names, but those of modules, a statement binds, deletes or changes in place where it
    stands: a name stored or deleted, an item or attribute of it stored or deleted, a method
    of it called (`KEYS.append(...)`, `KEYS[0] = ...`, `del KEYS[0]`)."""
    touched = set(_binds(node)) if isinstance(node, SCOPES) else set()
    for at in _outside_definitions(node):
        if isinstance(at, ast.Name) and isinstance(at.ctx, (ast.Store, ast.Del)):
            touched.add(at.id)
        elif isinstance(at, (ast.Subscript, ast.Attribute)) and isinstance(at.ctx, (ast.Store, ast.Del)):
            base = at.value
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            if isinstance(base, ast.Name):
                touched.add(base.id)
        elif isinstance(at, ast.Call) and isinstance(at.func, ast.Attribute) and isinstance(at.func.value, ast.Name):
            touched.add(at.func.value.id)
    return touched - modules


def _needed(body, roots):
    """A notebook's statements that bind or change what `roots` read, and what those read in
    turn, wherever they stand (a change after a definition too), with the imports: what a user
    copies of it into a module file. The rest (downloads of the data, its Beam pipeline run,
    training, prints) is left out."""
    modules = {name for node in body if isinstance(node, (ast.Import, ast.ImportFrom)) for name in _binds(node)}
    needed, kept = set(roots), {i for i, node in enumerate(body) if isinstance(node, (ast.Import, ast.ImportFrom))}
    grown = True
    while grown:
        grown = False
        for i, node in enumerate(body):
            if i not in kept and _touches(node, modules) & needed:
                kept.add(i)
                needed |= _reads(node)
                grown = True
    return [body[i] for i in sorted(kept)]


def _lifted(tree, source, fn, path):
    """`tree`'s body with the function `fn`, where it is defined inside another, added at the
    module's top level as it is written. Raises ValueError where it reads a name of the
    function around it (a closure): it would read another there."""
    if any(isinstance(node, ast.FunctionDef) and node.name == fn for node in tree.body):
        return tree.body
    found = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == fn]
    if len(found) != 1:
        raise ValueError("%s: %d functions named %s" % (path, len(found), fn))
    tables = [symtable.symtable(source, path, "exec")]
    while tables:
        table = tables.pop()
        if table.get_type() == "function" and table.get_name() == fn and table.get_frees():
            raise ValueError("%s: %s reads %s of the function around it" % (path, fn, ", ".join(table.get_frees())))
        tables += table.get_children()
    return tree.body + found


def load_module(name, wheel, tft):
    """Pipeline `name`'s module, executed with `tft` as its tf.Transform: its
    `import tensorflow_transform as tft` importing `tft`'s module (`_with_tft`); of a notebook,
    what its function and schema need (`_needed`); the imports that do not import here left
    out (`_without_left_out`); its function taken out of the one it is defined in (`_lifted`)."""
    path = PIPELINES[name].module
    source = module_source(wheel, name)
    tree = _with_tft(ast.parse(source), tft, path)
    if path.endswith(".ipynb"):
        tree.body = _needed(tree.body, [PIPELINES[name].fn] + [PIPELINES[name].schema] * bool(PIPELINES[name].schema))
    tree.body = _without_left_out(tree.body, path)
    tree.body = _lifted(tree, source, PIPELINES[name].fn, path)
    module = types.ModuleType("example_" + name)
    # Its source where inspect looks, as for a file: autograph converts its functions (the
    # trainer's tf.functions) as it would the author's.
    filename = "<%s>/%s" % (name, path)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    # Annotations unevaluated: the trainer's signatures name the classes of the imports left out.
    code = compile(tree, filename, "exec", flags=__future__.annotations.compiler_flag)
    exec(code, module.__dict__)
    if module.tft is not tft:
        raise ValueError("%s: tft is rebound after its import" % path)
    return module


def make_fn(name, wheel):
    """A `make_fn(tft)` for benchmarks/tf_transform.run_tft and the compat tier: pipeline
    `name`'s preprocessing_fn, its module loaded by `load_module`."""

    def make(tft):
        return getattr(load_module(name, wheel, tft), PIPELINES[name].fn)

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
    """{feature: its type's name ("FLOAT", "INT", "BYTES")} of a schema in text format."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = text_format.Parse(schema_text, schema_pb2.Schema())
    return {f.name: schema_pb2.FeatureType.Name(f.type) for f in schema.feature}


def _split_dir(work, split):
    """Where compare_tft reads `split`'s raw examples."""
    return os.path.dirname(compare_tft.raw_pattern(work, split))


def _write_splits(work, schema_text, records):
    """raw/ (two of every three records, in order) and eval/ (the third), GZIP'd TFRecord
    shards, and the schema: TFX's ExampleGen splits 2:1 too (by a hash of each record)."""
    import tensorflow as tf

    with open(compare_tft.schema_path(work), "w") as f:
        f.write(schema_text)
    splits = {"raw": [r for i, r in enumerate(records) if i % 3 != 2], "eval": records[2::3]}
    for split, chosen in splits.items():
        os.makedirs(_split_dir(work, split), exist_ok=True)
        shards = compare_tft.SHARDS
        for shard in range(shards):
            path = os.path.join(_split_dir(work, split), "part-%05d.tfrecord.gz" % shard)
            with tf.io.TFRecordWriter(path, options="GZIP") as writer:
                for record in chosen[shard * len(chosen) // shards : (shard + 1) * len(chosen) // shards]:
                    writer.write(record)


def _csv_records(text, schema_text):
    """The serialized examples of a CSV's rows, each value by its schema type, an empty cell missing."""
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
    with open(compare_tft.schema_path(work), "wb") as f:
        f.write(z.read(PENGUIN + "schema/schema.pbtxt"))
    for split, name in (("raw", "Split-train"), ("eval", "Split-eval")):
        os.makedirs(_split_dir(work, split), exist_ok=True)
        member = PENGUIN + "data/%s/data_tfrecord-00000-of-00001.gz" % name
        with z.open(member) as src, open(os.path.join(_split_dir(work, split), "part-00000.tfrecord.gz"), "wb") as dst:
            shutil.copyfileobj(src, dst)


IMDB_SCHEMA = """\
feature { name: "label" type: INT presence { min_fraction: 1.0 } shape { dim { size: 1 } } }
feature { name: "text" type: BYTES presence { min_fraction: 1.0 } shape { dim { size: 1 } } }
"""


def _imdb(work, z):
    """TFX's 100 labelled IMDB reviews (its CSV), with the schema SchemaGen infers of them
    (infer_feature_shape: one value a feature, a shape of [1], as penguin's schema has)."""
    _write_splits(
        work, IMDB_SCHEMA, _csv_records(z.read(IMDB + "data/imdb_small_with_labels.txt").decode(), IMDB_SCHEMA)
    )


MNIST_SCHEMA = """\
feature { name: "image_floats" type: FLOAT presence { min_fraction: 1.0 } shape { dim { size: 784 } } }
feature { name: "image_class" type: INT presence { min_fraction: 1.0 } shape { dim { size: 1 } } }
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


CENSUS_EXAMPLES = 3000


def _census(work, z, schema_text, module):
    """Examples of the census data's shape (neither TFX nor tf.Transform ships it): the
    module's categorical features with the data's leading space, its numeric ones, its
    optional ones (where it has any) missing from a fifth of them, the label with the test
    file's trailing period in some."""
    import random

    rng = random.Random(1)
    types_ = _schema_types(schema_text)
    categories = {
        key: [" %s_%d" % (key, i) for i in range(rng.randint(3, 9))] for key in module.CATEGORICAL_FEATURE_KEYS
    }
    records = []
    for _ in range(CENSUS_EXAMPLES):
        features = {key: [rng.choice(values)] for key, values in categories.items()}
        features.update({key: [repr(round(rng.uniform(0, 100), 1))] for key in module.NUMERIC_FEATURE_KEYS})
        for key in getattr(module, "OPTIONAL_NUMERIC_FEATURE_KEYS", []):
            features[key] = [repr(float(rng.randint(1, 16)))] if rng.random() < 0.8 else []
        features[module.LABEL_KEY] = [rng.choice((" >50K", " <=50K", " <=50K."))]
        records.append(_example(features, types_))
    _write_splits(work, schema_text, records)


def _sentiment(work, z, schema_text, module):
    """TFX's 100 labelled IMDB reviews as the sentiment example's review and label."""
    types_ = _schema_types(schema_text)
    rows = csv.DictReader(io.StringIO(z.read(IMDB + "data/imdb_small_with_labels.txt").decode()))
    records = [_example({module.REVIEW_KEY: [row["text"]], module.LABEL_KEY: [row["label"]]}, types_) for row in rows]
    _write_splits(work, schema_text, records)


def _simple(work, z, schema_text, module):
    """The simple example's three features over 300 examples (its module holds three)."""
    import random

    rng = random.Random(2)
    types_ = _schema_types(schema_text)
    words = ("hello", "world", "hello", "tf", "transform")
    records = [
        _example(
            {
                "x": [repr(round(rng.gauss(2, 1), 2))],
                "y": [repr(round(rng.uniform(0, 9), 1))],
                "s": [rng.choice(words)],
            },
            types_,
        )
        for _ in range(300)
    ]
    _write_splits(work, schema_text, records)


WRITERS = {
    "taxi": _taxi,
    "penguin": _penguin,
    "imdb": _imdb,
    "mnist": _mnist,
    "census": _census,
    "sentiment": _sentiment,
    "simple": _simple,
}


def module_schema(module, attribute):
    """The raw schema a module makes (`attribute`: a Schema, or a DatasetMetadata holding one), as text."""
    from google.protobuf import text_format

    schema = getattr(module, attribute)
    return text_format.MessageToString(getattr(schema, "schema", schema))


def write_pipeline_data(name, wheel, work, tft):
    """Writes pipeline `name`'s raw examples (raw/, eval/) and schema under `work`; where its
    module makes its raw schema, the one it makes with `tft` as its tf.Transform."""
    os.makedirs(work, exist_ok=True)
    pipeline = PIPELINES[name]
    with zipfile.ZipFile(wheel) as z:
        if pipeline.schema is None:
            WRITERS[pipeline.data](work, z)
            return
        module = load_module(name, wheel, tft)
        WRITERS[pipeline.data](work, z, module_schema(module, pipeline.schema), module)
