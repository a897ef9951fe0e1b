"""`transform.applied.SavedTransform`, without a cluster: a transform_fn with tables used only
within tf.cond's branches (one of string keys, one of int64 keys and float values, read by its
size alone) is applied as the loaded SavedModel computes it; a table filled from an asset's
file, by the function (tf.Transform's) or as the SavedModel loads (ours), is applied from a
copy of the file made where it is loaded (the workers may not reach the original), none of
its terms in the graph; its digest, which ties a checkpoint, is the same for two loads and
for processes of other hash seeds, and another for another constant or another file's contents."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.trackable import resource as trackable_resource

from tf2_mapreduce.transform.applied import SavedTransform

SIGNATURE = [{"x": tf.TensorSpec([None], tf.float32), "s": tf.TensorSpec([None], tf.string)}]


def save(path, divisor):
    module = tf.Module()
    with tf.init_scope():
        module.names = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer([b"a", b"b"], tf.constant([1, 2], tf.int64)), -1
        )
        module.floats = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant([7, 8, 9], tf.int64), [0.5, 1.5, 2.5]), 0.0
        )

    def transform_fn(inputs):
        x, s = inputs["x"], inputs["s"]
        return {
            "y": tf.cond(tf.size(x) > 0, lambda: x / divisor + tf.cast(module.floats.size(), tf.float32), lambda: x),
            "k": tf.cond(tf.size(s) > 0, lambda: module.names.lookup(s), lambda: tf.zeros_like(s, tf.int64)),
        }

    module.transform_fn = tf.function(transform_fn, input_signature=SIGNATURE)
    tf.saved_model.save(module, path)
    return path


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved")
    return save(str(root / "three"), 3.0), save(str(root / "four"), 4.0)


def test_tables_used_only_in_branches_are_applied_as_loaded(saved):
    transform = SavedTransform(saved[0])
    features = {"x": tf.constant([1.0, 2.0, 3.5]), "s": tf.constant([b"b", b"zz", b"a"])}
    applied = tf.function(lambda f: transform.apply(f))(features)
    loaded = tf.saved_model.load(saved[0]).transform_fn(features)
    assert sorted(applied) == ["k", "y"]
    for name in applied:
        assert np.array_equal(applied[name].numpy(), loaded[name].numpy()), name
    assert applied["k"].numpy().tolist() == [2, -1, 1]


def digest_in_a_process(path, seed):
    code = "from tf2_mapreduce.transform.applied import SavedTransform as S; print(S(%r).digest)" % path
    run = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONHASHSEED=str(seed), TF_CPP_MIN_LOG_LEVEL="3"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.split()[-1]


def test_the_digest_is_the_computation_not_the_load(saved):
    here = SavedTransform(saved[0]).digest
    assert SavedTransform(saved[0]).digest == here  # a second load numbers its functions anew
    current = os.environ.get("PYTHONHASHSEED", "")
    seed = int(current) + 1 if current.isdigit() else 1  # another than this process's
    assert digest_in_a_process(saved[0], seed) == here
    assert SavedTransform(saved[1]).digest != here


def save_file_tables(path, lines):
    """A transform_fn that makes two tables itself, in the function, from an asset's file
    of `lines`: its lines as keys, and its second column (by ",") of integers by its first."""
    source = os.path.join(os.path.dirname(path), os.path.basename(path) + ".txt")
    with open(source, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    module = tf.Module()
    module.asset = tf.saved_model.Asset(source)
    module.made = []

    def transform_fn(inputs):
        # As tf.Transform and tf2_mapreduce save a table the user's function makes: tracked
        # as it is made, so the SavedModel captures it, and fills it in the function.
        made = trackable_resource.ResourceTracker()
        with trackable_resource.resource_tracker_scope(made):
            file_path = tf.identity(module.asset.asset_path)
            whole = tf.lookup.TextFileInitializer(
                file_path, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER
            )
            columns = tf.lookup.TextFileInitializer(file_path, tf.string, 0, tf.int64, 1, delimiter=",")
            outputs = {
                "line": tf.lookup.StaticVocabularyTable(whole, 2).lookup(inputs["s"]),
                "column": tf.lookup.StaticHashTable(columns, -7).lookup(
                    tf.strings.split(inputs["s"], ",").to_tensor()[:, 0]
                ),
            }
        module.made.extend(made.resources)
        return outputs

    module.transform_fn = tf.function(transform_fn, input_signature=SIGNATURE)
    tf.saved_model.save(module, path)
    os.remove(source)
    return path


def _string_constants(graph_def):
    """Every string held by a Const node of `graph_def` or of a function of its library."""
    nodes = list(graph_def.node) + [node for f in graph_def.library.function for node in f.node_def]
    return {v for node in nodes if node.op == "Const" for v in node.attr["value"].tensor.string_val}


def test_a_table_the_function_fills_from_a_file_is_applied_from_a_copy_made_where_loaded_and_no_term_is_in_the_graph(
    tmp_path,
):
    lines = ["b,5", "a,9", "zz,2"]
    path = save_file_tables(str(tmp_path / "tables"), lines)
    features = {"x": tf.constant([0.0] * 4), "s": tf.constant([b"a,9", b"zz,2", b"q", b"b,5"])}
    loaded = tf.saved_model.load(path).transform_fn(features)
    transform = SavedTransform(path, files_into=str(tmp_path / "for the workers"))
    shutil.move(path, str(tmp_path / "moved"))  # as where a worker runs: no such file
    step = tf.function(lambda f: transform.apply(f))
    applied = step(features)
    # The terms are read from the file where the step runs, never carried in its graph.
    traced = step.get_concrete_function(features).graph.as_graph_def()
    assert not {b"b", b"a", b"zz", b"b,5", b"zz,2"} & _string_constants(traced)
    assert applied["line"].numpy().tolist() == [1, 2, loaded["line"].numpy()[2], 0]
    assert applied["column"].numpy().tolist() == [9, 2, -7, 5]
    for name in applied:
        assert np.array_equal(applied[name].numpy(), loaded[name].numpy()), name
    other = save_file_tables(str(tmp_path / "other"), ["b,5", "a,9", "zz,3"])
    assert SavedTransform(other).digest != transform.digest
    again = save_file_tables(str(tmp_path / "again"), lines)
    assert SavedTransform(again).digest == transform.digest


def save_loaded_table(directory, name, offset=0):
    """As tf2_mapreduce saves a vocabulary: a table made outside the function, filled from
    its asset as the SavedModel loads (its ids from `offset`), the asset then removed."""
    source = os.path.join(directory, name + ".txt")
    with open(source, "w") as f:
        f.write("b\nzz\na\n")
    module = tf.Module()
    module.asset = tf.saved_model.Asset(source)
    with tf.init_scope():
        initializer = tf.lookup.TextFileInitializer(
            module.asset.asset_path,
            tf.string,
            tf.lookup.TextFileIndex.WHOLE_LINE,
            tf.int64,
            tf.lookup.TextFileIndex.LINE_NUMBER,
            value_index_offset=offset,
        )
        module.table = tf.lookup.StaticVocabularyTable(initializer, 2)
    module.transform_fn = tf.function(
        lambda inputs: {"id": module.table.lookup(inputs["s"])}, input_signature=SIGNATURE
    )
    path = os.path.join(directory, name)
    tf.saved_model.save(module, path)
    os.remove(source)
    return path


def test_a_table_the_savedmodel_fills_from_a_file_as_it_loads_is_applied_from_a_copy_and_no_term_is_in_the_graph(
    tmp_path,
):
    path = save_loaded_table(str(tmp_path), "saved")
    features = {"x": tf.constant([0.0] * 4), "s": tf.constant([b"a", b"zz", b"q", b"b"])}
    loaded = tf.saved_model.load(path).transform_fn(features)
    transform = SavedTransform(path, files_into=str(tmp_path / "for the workers"))
    shutil.move(path, str(tmp_path / "moved"))
    step = tf.function(lambda f: transform.apply(f))
    applied = step(features)
    assert applied["id"].numpy().tolist()[:2] == [2, 1] and applied["id"].numpy()[3] == 0
    assert np.array_equal(applied["id"].numpy(), loaded["id"].numpy())
    traced = step.get_concrete_function(features).graph.as_graph_def()
    assert not {b"a", b"b", b"zz"} & _string_constants(traced)


def test_the_digest_covers_how_a_table_is_filled_from_its_file(tmp_path):
    """The same file, ids from 0 and from 10: another computation, which no graph of the
    function says (the filling is the SavedModel's, as it loads)."""
    first = SavedTransform(save_loaded_table(str(tmp_path), "from0"))
    again = SavedTransform(save_loaded_table(str(tmp_path), "from0 again"))
    shifted = SavedTransform(save_loaded_table(str(tmp_path), "from10", offset=10))
    assert first.digest == again.digest != shifted.digest


def test_a_table_the_savedmodel_fills_from_a_file_as_it_loads_holds_none_of_it_where_loaded(tmp_path):
    """The coordinator loads the transform_fn: a vocabulary's table must not be filled
    there (its memory would grow with every term), only where the steps run."""
    path = save_loaded_table(str(tmp_path), "saved")
    full = tf.saved_model.load(path).table.resource_handle
    assert int(tf.raw_ops.LookupTableSizeV2(table_handle=full)) == 3
    transform = SavedTransform(path, files_into=str(tmp_path / "for the workers"))
    assert int(tf.raw_ops.LookupTableSizeV2(table_handle=transform.loaded.table.resource_handle)) <= 1
    applied = tf.function(lambda f: transform.apply(f))({"x": tf.constant([0.0]), "s": tf.constant([b"a"])})
    assert applied["id"].numpy().tolist() == [2]


class _ReadAsLoaded(tf.saved_model.experimental.TrackableResource):
    """A table filled as the SavedModel loads from its asset's bytes read whole (not from
    the file by a table's kernel): lines, ids by line."""

    def __init__(self, asset):
        self.asset = asset
        super().__init__()

    def _create_resource(self):
        return tf.raw_ops.HashTableV2(key_dtype=tf.string, value_dtype=tf.int64)

    def _initialize(self):
        keys = tf.strings.split(tf.strings.strip(tf.io.read_file(self.asset.asset_path)), "\n")
        values = tf.range(tf.size(keys, out_type=tf.int64))
        return tf.raw_ops.InitializeTableV2(table_handle=self.resource_handle, keys=keys, values=values)


def test_a_table_the_savedmodel_fills_from_an_asset_otherwise_is_applied_as_loaded(tmp_path):
    """An asset read as the SavedModel loads other than by a table's file kernel cannot be
    left unread where it is loaded: the SavedModel is then loaded whole."""
    source = str(tmp_path / "terms.txt")
    with open(source, "w") as f:
        f.write("b\nzz\na\n")
    module = tf.Module()
    module.asset = tf.saved_model.Asset(source)  # tracked: saved, its path captured as the asset's
    module.table = _ReadAsLoaded(module.asset)
    module.table.resource_handle  # noqa: B018 - made here, not in the function: captured by it

    def transform_fn(inputs):
        found = tf.raw_ops.LookupTableFindV2(
            table_handle=module.table.resource_handle, keys=inputs["s"], default_value=tf.constant(-1, tf.int64)
        )
        return {"id": found}

    module.transform_fn = tf.function(transform_fn, input_signature=SIGNATURE)
    path = str(tmp_path / "saved")
    tf.saved_model.save(module, path)
    os.remove(source)
    transform = SavedTransform(path)
    applied = tf.function(lambda f: transform.apply(f))(
        {"x": tf.constant([0.0] * 3), "s": tf.constant([b"a", b"zz", b"q"])}
    )
    assert applied["id"].numpy().tolist() == [2, 1, -1]
