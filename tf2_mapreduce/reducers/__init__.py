"""Reducers: what a job's map output means, one object per kind of result (`base.Reducer`
gives the protocol; `Fold` is the base of a reducer of one's own). Their names here are
the package's public reducers (`tf2_mapreduce.__all__` takes them from `__all__`)."""

from tf2_mapreduce.reducers.base import Reducer
from tf2_mapreduce.reducers.keys import Distinct, KeySum
from tf2_mapreduce.reducers.pieces import Fold, Max, Min, Sum, VectorSum
from tf2_mapreduce.reducers.statistics import Statistics
from tf2_mapreduce.reducers.vocabularies import Vocabularies

__all__ = [
    "Reducer",
    "Fold",
    "Sum",
    "VectorSum",
    "Min",
    "Max",
    "KeySum",
    "Distinct",
    "Vocabularies",
    "Statistics",
]
