"""Sinks: a job's map output written as files as it runs, not reduced (`base.Sink` gives
the protocol); `Records` is the one there is, and `tf2_mapreduce` exports it."""

from tf2_mapreduce.outputs.sinks.base import Sink, sink_of
from tf2_mapreduce.outputs.sinks.records import Records

__all__ = ["Sink", "sink_of", "Records"]
