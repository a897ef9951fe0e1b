"""A traced function's graph pruned for import (`transform/imported.py`): the nodes TensorFlow's
own extract_sub_graph keeps, byte for byte (colocations and control edges followed), and the
pruned graph imports and computes what the function computes."""

import numpy as np
import tensorflow as tf

from tf2_mapreduce.transform.imported import Importable, names_of


def traced():
    """(the function's `Importable`, the name of each of its outputs)."""

    @tf.function(input_signature=[{"x": tf.TensorSpec([None], tf.float32), "s": tf.TensorSpec([None], tf.string)}])
    def fn(inputs):
        x = inputs["x"]
        doubled = x * 2.0
        with tf.compat.v1.colocate_with(doubled.op):  # placed with an op it is not computed from
            shifted = x + 1.0
        checked = tf.debugging.assert_all_finite(x, "finite")
        with tf.control_dependencies([checked]):
            lengths = tf.strings.length(inputs["s"])
        return {"shifted": shifted, "lengths": lengths, "doubled": doubled}

    function = fn.get_concrete_function()
    return Importable(function), names_of(function.structured_outputs)


def test_the_pruned_graph_is_extract_sub_graphs_for_every_subset_of_outputs():
    graph, _ = traced()
    for k in range(1, len(graph.outputs) + 1):
        for wanted in (graph.outputs[:k], graph.outputs[-k:]):
            ours = graph._pruned(wanted)
            theirs = tf.compat.v1.graph_util.extract_sub_graph(graph.graph_def, [t.split(":")[0] for t in wanted])
            assert ours.SerializeToString(deterministic=True) == theirs.SerializeToString(deterministic=True)


def test_an_output_placed_with_another_imports_and_computes():
    graph, names = traced()
    (shifted,) = [t for name, t in zip(names, graph.outputs) if name == "shifted"]

    @tf.function
    def step(x, s):
        return graph.imported({"x": x, "s": s}, [shifted], None, "fn")

    (got,) = step(tf.constant([1.0, 2.5]), tf.constant([b"a", b"bc"]))
    np.testing.assert_array_equal(got.numpy(), [2.0, 3.5])
