"""The transform as tf.Transform writes it (`tft_beam.WriteTransformFn`): `transform_fn/`, a
SavedModel whose `transform_fn` maps raw features to transformed ones with the analyzers'
results built in, its vocabularies as assets; `transformed_metadata/`, their schema; and
`metadata/`, the raw features' schema, where TFX's Transform writes it. So
`tft.TFTransformOutput(dir)` loads it, for training and serving alike."""

import json
import os
import shutil
import tempfile

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.paths import join
from tf2_mapreduce.transform import kinds, skeleton, trace
from tf2_mapreduce.transform import schema as schemas
from tf2_mapreduce.transform.analysis import outputs_checked, raw_specs

__all__ = ["TRANSFORM_FN", "METADATA", "WRITTEN", "write", "write_reads", "copy"]

TRANSFORM_FN = "transform_fn"
METADATA = "transformed_metadata"
# The directories `write` writes.
WRITTEN = (TRANSFORM_FN, METADATA, os.path.dirname(schemas.RAW_SCHEMA))


def _file_table(path, key_dtype, default_value, num_oov_buckets):
    initializer = tf.lookup.TextFileInitializer(
        path, key_dtype, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER
    )
    if num_oov_buckets > 0:
        return tf.lookup.StaticVocabularyTable(initializer, num_oov_buckets)
    return tf.lookup.StaticHashTable(initializer, default_value)


def _vocabulary_files(calls, values, assets) -> dict:
    """{call index: path} of a file in `assets` of each vocabulary known, named as its file
    (its `kinds.VocabularyFile`), a `skeleton.STUB` until made a copy of it (`_filled`)."""
    paths = {}
    for index, call in enumerate(calls):
        if call.kind == kinds.VOCABULARY and values[index] is not None:
            paths[index] = os.path.join(assets, os.path.basename(values[index].path))
            with open(paths[index], "wb") as f:
                f.write(skeleton.STUB)
    return paths


def _filled(values, paths) -> None:
    """Each of `paths` ({call index: path}) a copy of the file of `values`[index]."""
    for index, path in paths.items():
        shutil.copyfile(values[index].path, path)


def _module(preprocessing_fn, feature_spec, calls, values, paths, reads=None):
    """The `tf.Module` saved as transform_fn/ (its `transform_fn` traced), and the
    transformed features' schema. With `reads` (call names, of calls whose value is None),
    its `transform_fn` gives instead what those calls read, by name."""
    # Private, both: the save's context (a trace is cached by it); TensorFlow's own
    # tracker of the resources made within (Keras uses it): a lookup table the user's
    # function makes under tf.init_scope (TFX's census example) is saved only if the
    # module tracks it.
    from tensorflow.python.saved_model import save_context
    from tensorflow.python.trackable import resource as trackable_resource

    module = tf.Module()
    module.tables, module.made_by_the_function = [], []
    # Every vocabulary is an asset, applied or not: a trainer reads one the function does
    # not apply by its name (vocabulary_file_by_name), and the SavedModel copies only assets
    # that something it saves tracks.
    assets = {index: tf.saved_model.Asset(paths[index]) for index in sorted(paths)}
    module.vocabularies = [assets[index] for index in sorted(assets)]

    def make_table(index, key_dtype, default_value, num_oov_buckets):
        with tf.init_scope():  # made once, outside the function, and saved with the module
            table = _file_table(paths[index], key_dtype, default_value, num_oov_buckets)
        module.tables.append(table)
        return table

    applying = trace.Applying(calls, values, make_table, lambda index: assets[index].asset_path)
    written = []

    def transform_fn(inputs):
        applying.restart()
        made = trackable_resource.ResourceTracker()
        with trace.tracing(applying), trackable_resource.resource_tracker_scope(made):
            outputs = outputs_checked(preprocessing_fn(dict(inputs)))
        module.made_by_the_function.extend(made.resources)
        if reads is not None:
            return {name: applying.read[name] for name in reads}
        # Here, where the outputs are still the tensors the mappers marked.
        written.append(schemas.transformed(outputs, applying.domains, sparse_shapes=applying.sparse_shapes))
        return dict(outputs)

    module.transform_fn = tf.function(transform_fn, input_signature=[raw_specs(feature_spec)], autograph=False)
    # Traced here, so that what the function makes is tracked before the save walks the
    # module; as the save traces (its context is part of what a trace is cached by), so
    # that the save uses this trace instead of tracing the user's function again.
    with save_context.save_context(tf.saved_model.SaveOptions()):
        module.transform_fn.get_concrete_function()
    return module, written[0] if written else None


def _write_text(path, text):
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(text)


def _saved(preprocessing_fn, feature_spec, calls, values, directory, reads=None):
    """Saves `directory`/transform_fn (`_module`'s); returns ({call index: its vocabulary
    file's path, removed since}, the transformed features' schema)."""
    assets = tempfile.mkdtemp(prefix="tf2_mapreduce-vocabularies-")
    try:
        # The module's tables are made here, and filled as they are made: of stand-ins, so
        # that this process never holds a vocabulary; the save copies the files filled.
        paths = _vocabulary_files(calls, values, assets)
        module, schema = _module(preprocessing_fn, feature_spec, calls, values, paths, reads)
        _filled(values, paths)
        tf.saved_model.save(module, join(directory, TRANSFORM_FN))
    finally:
        shutil.rmtree(assets, ignore_errors=True)
    return paths, schema


def write(preprocessing_fn, raw_schema, feature_spec, calls, values, directory) -> dict:
    """Writes `directory`/transform_fn and `directory`/transformed_metadata for
    `preprocessing_fn` over `feature_spec` (`raw_schema` read as tft reads it), its
    analyzers' `calls` having given `values`, and `raw_schema` as `directory`/metadata.
    Returns {vocabulary file name: its terms' count}. Blocking."""
    paths, schema = _saved(preprocessing_fn, feature_spec, calls, values, directory)
    _write_text(join(directory, METADATA + "/schema.pbtxt"), schemas.text(schema))
    _write_text(join(directory, schemas.RAW_SCHEMA), schemas.text(raw_schema))
    names = {calls[i].params["key"]: os.path.basename(p) for i, p in paths.items()}
    if names:
        _write_text(join(directory, METADATA + "/asset_map"), json.dumps(names))
    return {calls[i].params["filename"]: values[i].size for i in paths}


def write_reads(preprocessing_fn, feature_spec, calls, values, names, directory) -> None:
    """Writes `directory`/transform_fn, a SavedModel whose `transform_fn` gives what the
    calls `names` of `preprocessing_fn` read ({name: 1-D values}), the calls before them
    having given `values` (None for those after). Between phases: the next phase's
    analyzers read their inputs through it, as the transform pass applies transform_fn. Blocking."""
    _saved(preprocessing_fn, feature_spec, calls, values, directory, reads=sorted(names))


def copy(source, names, target) -> None:
    """Copies the directories `names` of `source` into `target` (any file systems), each
    file whole. Blocking."""
    for name in names:
        top = join(source, name)
        for directory, _, files in tf.io.gfile.walk(top):
            into = join(target, name + directory[len(top) :])
            tf.io.gfile.makedirs(into)
            for file in files:
                tf.io.gfile.copy(join(directory, file), join(into, file), overwrite=True)
