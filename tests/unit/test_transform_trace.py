"""How a preprocessing_fn is traced (`transform.trace`, `transform.as_written`,
`transform.digest`), without a cluster: float arithmetic traced gives eager execution's bits
in any graph and any batch; a function calling tf.cond is digested, the same each trace."""

import collections
import contextlib
import io
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from helpers.counted import Counted

import tf2_mapreduce.transform as tft
from tf2_mapreduce.transform import analysis, trace

SPEC = {"x": tf.io.FixedLenFeature([], tf.float32)}
VALUES = np.random.RandomState(3).uniform(0.5, 50, 4099).astype(np.float32)


def _traced(fn):
    """`fn` as a tf.function whose arithmetic is made as_written, like a map step's."""

    def within(x):
        with trace.tracing(trace.Applying([], [], None, None)):
            return fn(x)

    return tf.function(within, input_signature=[tf.TensorSpec([None], tf.float32)])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x / 3.0,
        lambda x: tf.pow(x, 0.5),
        lambda x: tf.math.log(1.0 + x),
        lambda x: x / tf.sqrt(x + 2.0),
        lambda x: (x - 1.5) / 2.5 * 3.0 / 7.0,
        lambda x: tf.exp(x / 20.0) - 1.0,
        lambda x: tf.cond(tf.size(x) > 0, lambda: tf.math.log(x) / 7.0, lambda: x),
        lambda x: tf.math.erfinv(x / 60.0),
    ],
)
def test_traced_arithmetic_has_eager_bits_in_any_batch(fn):
    traced = _traced(fn)
    # Eagerly, 16 times over: every value of the first copy is computed in vector lanes.
    eager = fn(tf.constant(np.tile(VALUES, 16))).numpy()[: len(VALUES)]
    whole = traced(tf.constant(VALUES)).numpy()
    alone = np.concatenate([traced(tf.constant(VALUES[i : i + 1])).numpy() for i in range(0, len(VALUES), 97)])
    assert alone.tobytes() == whole[::97].tobytes()
    assert whole.tobytes() == eager.tobytes()


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: tf.nn.log_softmax(tf.stack([x, x / 2.0, -x / 9.0], axis=1))[:, 0],
        lambda x: tf.nn.softmax(tf.cast(tf.stack([x, x / 2.0, -x / 9.0], axis=1), tf.float64))[:, 1],
    ],
)
def test_a_softmax_has_the_same_bits_in_any_batch(fn):
    # Made of exp and log in lanes: TensorFlow's own kernels give a row other bits by its place.
    traced = _traced(fn)
    whole = traced(tf.constant(VALUES)).numpy()
    alone = np.concatenate([traced(tf.constant(VALUES[i : i + 1])).numpy() for i in range(0, len(VALUES), 97)])
    assert alone.tobytes() == whole[::97].tobytes()


def test_a_division_by_a_constant_differs_without_it():
    # What as_written guards against, still so in this TensorFlow: a tf.function's graph
    # multiplies by the inverse, eager execution divides.
    plain = tf.function(lambda x: x / 3.0, input_signature=[tf.TensorSpec([None], tf.float32)])
    assert plain(tf.constant(VALUES)).numpy().tobytes() != (VALUES / np.float32(3.0)).tobytes()
    assert _traced(lambda x: x / 3.0)(tf.constant(VALUES)).numpy().tobytes() == (VALUES / np.float32(3.0)).tobytes()


def _with_cond(divisor):
    def preprocessing_fn(inputs):
        x = inputs["x"]
        centered = x - tft.mean(x)
        return {"y": tf.cond(tf.size(x) > 0, lambda: centered / divisor, lambda: centered)}

    return preprocessing_fn


def test_a_function_calling_tf_cond_is_digested_the_same_each_trace():
    once = analysis.trace_calls(_with_cond(3.0), SPEC).computation
    again = analysis.trace_calls(_with_cond(3.0), SPEC).computation
    other = analysis.trace_calls(_with_cond(4.0), SPEC).computation
    assert once == again != other


@pytest.mark.parametrize(
    "dtype, analyzer",
    [
        (tf.float16, lambda x: tft.mean(x, reduce_instance_dims=False)),
        (tf.float16, lambda x: tft.var(x)),
        (tf.float32, lambda x: tft.mean(x, output_dtype=tf.float64)),
        (tf.bfloat16, lambda x: tft.sum(x)),
        (tf.int32, lambda x: tft.min(x, reduce_instance_dims=False)),
    ],
)
def test_an_analyzers_result_has_the_dtype_and_shape_its_stand_in_promised(dtype, analyzer):
    from tf2_mapreduce.transform import early
    from tf2_mapreduce.transform import schema as schemas

    def fn(inputs):  # the result added to x of its dtype: the transform's trace fails on another dtype
        x = tf.cast(inputs["x"], dtype)
        return {"y": tf.cast(x + tf.cast(analyzer(x), dtype), tf.float32)}

    spec = {"x": tf.io.FixedLenFeature([2], tf.float32)}
    traced = analysis.trace_calls(fn, spec)
    (call,) = traced.calls
    (result,) = analysis.results(traced.calls, None, None)
    assert tf.constant(result).dtype == call.out and np.shape(result) == ((2,) if call.params else ())
    early.check_saves(fn, schemas.raw(spec), spec, traced.calls)


@pytest.mark.parametrize("shape", [[0], [3, 0]])
def test_an_elementwise_analyzer_over_no_values_an_example_is_refused(shape):
    spec = {"x": tf.io.FixedLenFeature(shape, tf.float32)}
    with pytest.raises(tft.NotSupported, match=r"mean\(reduce_instance_dims=False\) of shape .*: no values"):
        analysis.trace_calls(
            lambda inputs: {"y": inputs["x"] - tft.mean(inputs["x"], reduce_instance_dims=False)}, spec
        )


def _tables_fn(a_values, b_values, b_keys=(b"a", b"b"), made="init_scope"):
    """A function making two tables, each read by a mean of its own: under tf.init_scope
    (TFX's census example; filled as it is traced), in the function (filled as it runs), or
    under tf.init_scope and read in a tf.map_fn (in a function of the graph's library)."""

    def table(keys, values):
        initializer = tf.lookup.KeyValueTensorInitializer(tf.constant(list(keys)), tf.constant(values))
        return tf.lookup.StaticHashTable(initializer, -1.0)

    def fn(inputs):
        s = tf.strings.as_string(inputs["x"])
        with tf.init_scope() if made != "in the function" else contextlib.nullcontext():
            ta, tb = table([b"a", b"b"], a_values), table(b_keys, b_values)
        if made == "read in map_fn":
            a, b = [tf.map_fn(t.lookup, s, fn_output_signature=tf.float32) for t in (ta, tb)]
        else:
            a, b = ta.lookup(s), tb.lookup(s)
        return {"a": a - tft.mean(a), "b": b - tft.mean(b)}

    return fn


@pytest.mark.parametrize("made", ["init_scope", "in the function", "read in map_fn"])
def test_calls_over_two_tables_are_named_by_what_each_table_holds(made):
    traced = analysis.trace_calls(_tables_fn([1.0, 2.0], [10.0, 20.0], made=made), SPEC)
    a, b = [call.name for call in traced.calls]
    assert a != b  # one result for both would scale b by a's mean
    assert traced.calls[0].counts != traced.calls[1].counts  # nor one count of both
    other = analysis.trace_calls(_tables_fn([1.0, 2.0], [10.0, 21.0], made=made), SPEC)
    assert [call.name for call in other.calls][1] != b and other.computation != traced.computation
    # The same tables made again (another trace, another process): a table made under
    # tf.init_scope and only read is known by what it holds (its keys given in another
    # order too), one made in the function by what fills it, so a resume is the same
    # computation. One passed into a function is opaque: named anew each trace, no resume.
    keys = (b"b", b"a") if made == "init_scope" else (b"a", b"b")
    again = _tables_fn([1.0, 2.0], [20.0, 10.0] if made == "init_scope" else [10.0, 20.0], b_keys=keys, made=made)
    again = analysis.trace_calls(again, SPEC)
    same = [call.name for call in again.calls] == [a, b] and again.computation == traced.computation
    assert same == traced.resumable == again.resumable == (made != "read in map_fn")


def _written_fn(write):
    """A function reading a table under tf.init_scope twice, with `write(table)` between."""

    def fn(inputs):
        s = tf.strings.as_string(inputs["x"])
        with tf.init_scope():
            table = tf.lookup.experimental.MutableHashTable(tf.string, tf.float32, -1.0)
            table.insert(tf.constant([b"a"]), tf.constant([1.0]))
        before = tf.ensure_shape(table.lookup(s), [None])
        write(table)
        after = tf.ensure_shape(table.lookup(s), [None])
        return {"a": before - tft.mean(before), "b": after - tft.mean(after)}

    return fn


@pytest.mark.parametrize(
    "write",
    [
        lambda table: table.insert(tf.constant([b"a"]), tf.constant([100.0])),
        lambda table: tf.raw_ops.LookupTableImportV2(
            table_handle=table.resource_handle, keys=tf.constant([b"b"]), values=tf.constant([2.0])
        ),
    ],
)
def test_reads_of_a_table_the_function_writes_are_never_named_alike(write):
    # Named before TensorFlow orders a table's reads and writes: a read is known by its ops
    # alone, which are the same before a write and after it.
    traced = analysis.trace_calls(_written_fn(write), SPEC)
    before, after = [call.name for call in traced.calls]
    assert before != after and not traced.resumable


@pytest.mark.parametrize(
    "varies",
    [
        lambda x: x + tf.random.uniform(tf.shape(x)),  # unseeded: other values each run
        lambda x: tf.py_function(lambda v: v * 2.0, [x], tf.float32),  # known by a token of the process
        lambda x: x + tf.cast(tf.strings.length(tf.io.read_file(__file__)), tf.float32),  # a file, by its path
        lambda x: tf.map_fn(lambda v: v + tf.random.uniform([]), x),  # in a function of the library
    ],
)
def test_what_a_trace_cannot_tell_is_never_named_alike_nor_resumed(varies):
    def fn(inputs):
        a, b = tf.ensure_shape(varies(inputs["x"]), [None]), tf.ensure_shape(varies(inputs["x"]), [None])
        return {"a": a - tft.mean(a), "b": b - tft.mean(b)}

    traced = analysis.trace_calls(fn, SPEC)
    a, b = [call.name for call in traced.calls]
    assert a != b and not traced.resumable


def test_a_table_kept_by_the_function_from_an_earlier_trace_is_traced_again():
    kept = []

    def fn(inputs):
        if not kept:  # made in the first trace, filled as the function runs
            kept.append(tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer([b"a"], [1.0]), -1.0))
        looked_up = kept[0].lookup(tf.strings.as_string(inputs["x"]))
        return {"a": looked_up - tft.mean(looked_up)}

    first, second = analysis.trace_calls(fn, SPEC), analysis.trace_calls(fn, SPEC)
    assert first.resumable and not second.resumable  # filled by the first trace's graph: opaque
    assert first.computation != second.computation


_NAMES_IN_A_PROCESS = """
import tensorflow as tf
import tf2_mapreduce.transform as tft
from tf2_mapreduce.transform import analysis

value = 1.0
held = tf.Variable(value)

def table_fn(inputs):
    with tf.init_scope():
        initializer = tf.lookup.KeyValueTensorInitializer(tf.constant([b"1"]), tf.constant([value]))
        table = tf.lookup.StaticHashTable(initializer, -1.0)
    return {"a": inputs["x"] - tft.mean(table.lookup(tf.strings.as_string(inputs["x"])))}

def variable_fn(inputs):
    return {"a": inputs["x"] - tft.mean(inputs["x"] * held)}

spec = {"x": tf.io.FixedLenFeature([], tf.float32)}
print(" ".join(analysis.trace_calls(fn, spec).computation for fn in (table_fn, variable_fn)))
"""


def test_a_captured_table_is_named_alike_in_another_process_a_variable_never():
    done = subprocess.run(
        [sys.executable, "-c", _NAMES_IN_A_PROCESS],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert done.returncode == 0, done.stderr
    here = io.StringIO()
    with contextlib.redirect_stdout(here):
        exec(_NAMES_IN_A_PROCESS, {})
    (table, variable), (table_here, variable_here) = done.stdout.split(), here.getvalue().split()
    assert table == table_here  # a resume's check: the same table, the same computation
    assert variable != variable_here  # what a variable holds is not known: its checkpoints are refused


def test_calls_that_count_the_same_values_share_one_count_and_each_makes_its_result(tmp_path):
    spec = {"s": tf.io.FixedLenFeature([], tf.string), "t": tf.io.FixedLenFeature([], tf.string)}

    def fn(inputs):
        s, t = inputs["s"], inputs["t"]
        whole, top = tft.vocabulary(s), tft.vocabulary(s, top_k=2, vocab_filename="top")
        other = tft.vocabulary(t, vocab_filename="t")
        return {
            "a": tft.apply_vocabulary(s, whole),
            "b": tft.apply_vocabulary(s, top),
            "c": tft.apply_vocabulary(t, other),
        }

    traced = analysis.trace_calls(fn, spec)
    job = analysis.analyze_job(traced.first_phase(), spec)
    assert len(traced.calls) == 3 and len(job.reducer.features) == 2  # s's two vocabularies count s once
    rng = np.random.RandomState(5)
    rows = [(b"s%d" % (rng.zipf(1.5) % 40), b"t%d" % rng.randint(9)) for _ in range(500)]
    records = [
        tf.train.Example(
            features=tf.train.Features(
                feature={k: tf.train.Feature(bytes_list=tf.train.BytesList(value=[v])) for k, v in zip("st", row)}
            )
        ).SerializeToString()
        for row in rows
    ]
    counted = tf.function(job.map_fn)(tf.constant(records))["values"]
    entries = [
        ((name, key), count)
        for name, keys in zip(job.reducer.features, counted)
        for key, count in collections.Counter(keys.numpy().tolist()).items()
    ]
    made = analysis.results(traced.calls, Counted(entries), str(tmp_path))
    for column, (call, file) in zip([0, 0, 1], zip(traced.calls, made)):
        oracle = collections.Counter(row[column] for row in rows)
        terms = [term for _, term in sorted(((c, t) for t, c in oracle.items()), reverse=True)]
        with open(file.path, "rb") as f:
            assert f.read().splitlines() == terms[: call.params["top_k"]]
