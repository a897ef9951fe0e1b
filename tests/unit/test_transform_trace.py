"""How a preprocessing_fn is traced (`transform.trace`, `transform.digest`), without a
cluster: a function calling tf.cond is digested, the same each trace."""

import tensorflow as tf

import tf2_mapreduce.transform as tft
from tf2_mapreduce.transform import analysis

SPEC = {"x": tf.io.FixedLenFeature([], tf.float32)}


def _with_cond(divisor):
    def preprocessing_fn(inputs):
        x = inputs["x"]
        centered = x - tft.mean(x)
        return {"y": tf.cond(tf.size(x) > 0, lambda: centered / divisor, lambda: centered)}

    return preprocessing_fn


def test_a_function_calling_tf_cond_is_digested_the_same_each_trace():
    _, _, once = analysis.trace_calls(_with_cond(3.0), SPEC)
    _, _, again = analysis.trace_calls(_with_cond(3.0), SPEC)
    _, _, other = analysis.trace_calls(_with_cond(4.0), SPEC)
    assert once == again != other
