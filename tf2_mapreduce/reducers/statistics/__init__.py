"""Exact statistics of tf.train.Example features, as TFDV defines them: the reducer, what
its table's keys mean, the figures' model, and how they are made from exact counts."""

from tf2_mapreduce.reducers.statistics.reducer import Statistics

__all__ = ["Statistics"]
