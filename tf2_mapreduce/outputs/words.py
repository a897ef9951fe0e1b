"""How a job's value is said: in words ("901 words (450 distinct)"), as named numbers (the
fields of JSON results, progress, TensorBoard's totals) and as rates. One function per
use, dispatched on the kind of reducer (or sink), so that a reducer only computes."""

import functools

from tf2_mapreduce.outputs.sinks import Records
from tf2_mapreduce.reducers import Distinct, Fold, KeySum, Max, Min, Statistics, Sum, VectorSum, Vocabularies
from tf2_mapreduce.reducers.keys import ExampleCounts
from tf2_mapreduce.reducers.statistics.model import DatasetStats

__all__ = ["describe", "fields", "total_fields", "rates"]


def _name(text):
    return text.replace(" ", "_")


def _with_distinct(text, distinct, what="distinct"):
    return text if distinct is None else "%s (%d %s)" % (text, distinct, what)


@functools.singledispatch
def describe(reducer, value, distinct=None) -> str:
    """The value in words, for the console and `Result.describe`."""
    raise TypeError("no words for the value of %s" % type(reducer).__name__)


@describe.register
def _(reducer: Fold, value, distinct=None):
    if value is None or not reducer.width:
        return str("-" if value is None else value)
    return ", ".join("%d %s" % pair for pair in zip(value, reducer.names)) if reducer.names else str(value)


@describe.register
def _(reducer: Sum, value, distinct=None):
    return "%d %s" % (value, reducer.unit)


@describe.register
def _(reducer: VectorSum, value, distinct=None):
    return ", ".join("%d %s" % pair for pair in zip(value, reducer.names))


@describe.register(Max)
@describe.register(Min)
def _(reducer, value, distinct=None):
    return "%s %s" % (reducer.name, "-" if value is None else "%d %s" % (value, reducer.unit))


@describe.register
def _(reducer: KeySum, value, distinct=None):
    return _with_distinct("%d %s" % (value, reducer.unit), distinct)


@describe.register
def _(reducer: Distinct, value, distinct=None):
    return "%d distinct %s" % (value, reducer.unit)


@describe.register
def _(reducer: Vocabularies, value, distinct=None):
    return _with_distinct("%d examples" % value, distinct, "distinct values")


@describe.register
def _(reducer: Records, value, distinct=None):
    return "%d %s written" % (value, reducer.unit)


@describe.register
def _(reducer: Statistics, value, distinct=None):
    if isinstance(value, DatasetStats):
        return "%d examples, %d features" % (value.num_examples, len(value.features))
    return _with_distinct("%d examples" % value, distinct, "distinct keys")


@functools.singledispatch
def fields(reducer, value, distinct=None) -> dict:
    """The value as named numbers: progress, TensorBoard's totals/, each file's row."""
    raise TypeError("no fields for the value of %s" % type(reducer).__name__)


@fields.register
def _(reducer: Fold, value, distinct=None):
    if reducer.width:
        return dict(zip(reducer.names or ["value_%d" % k for k in range(reducer.width)], value))
    return {"value": value}


@fields.register
def _(reducer: Sum, value, distinct=None):
    return {_name(reducer.unit): value}


@fields.register
def _(reducer: VectorSum, value, distinct=None):
    return dict(zip(reducer.names, value))


@fields.register
def _(reducer: Records, value, distinct=None):
    return {_name(reducer.unit): value}


@fields.register(Max)
@fields.register(Min)
def _(reducer, value, distinct=None):
    return {_name("%s %s" % (reducer.name, reducer.unit)): value}


def _keyed(named, distinct):
    if distinct is not None:
        named["distinct_keys"] = distinct
    return named


@fields.register
def _(reducer: KeySum, value, distinct=None):
    return _keyed({_name(reducer.unit): value}, distinct)


@fields.register
def _(reducer: Distinct, value, distinct=None):
    return {"distinct_" + _name(reducer.unit): value}


@fields.register
def _(reducer: ExampleCounts, value, distinct=None):
    return _keyed({"examples": value}, distinct)


@functools.singledispatch
def total_fields(reducer, value, distinct=None) -> dict:
    """The value as the top-level fields of a written result (`--output`'s JSON)."""
    return fields(reducer, value)


@total_fields.register
def _(reducer: Sum, value, distinct=None):
    return {"total_" + _name(reducer.unit): value}


@total_fields.register
def _(reducer: VectorSum, value, distinct=None):
    return {"totals": fields(reducer, value)}


@total_fields.register
def _(reducer: KeySum, value, distinct=None):
    return {"total_" + _name(reducer.unit): value, "distinct_" + _name(reducer.unit): distinct}


@total_fields.register
def _(reducer: Distinct, value, distinct=None):
    return fields(reducer, value)


@functools.singledispatch
def rates(reducer, before, after, seconds) -> dict:
    """Named numbers per second between two values (TensorBoard's throughput/): none
    unless the value only grows as pieces are done."""
    return {}


@rates.register(Sum)
@rates.register(KeySum)
@rates.register(Records)
def _(reducer, before, after, seconds):
    return {_name(reducer.unit): (after - before) / seconds}


@rates.register
def _(reducer: VectorSum, before, after, seconds):
    return {name: (b - a) / seconds for name, a, b in zip(reducer.names, before, after)}


@rates.register
def _(reducer: Distinct, before, after, seconds):
    return {}


@rates.register
def _(reducer: ExampleCounts, before, after, seconds):
    return {"examples": (after - before) / seconds}
