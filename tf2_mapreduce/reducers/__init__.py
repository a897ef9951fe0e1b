"""Reducers: what a job's map output means, one object per kind of result (`base.Reducer`
gives the protocol every one fills in). Their names here are the package's public
reducers (`tf2_mapreduce.__all__` takes them from `__all__`)."""

from tf2_mapreduce.reducers.base import *  # noqa: F403
from tf2_mapreduce.reducers.base import __all__ as _base
from tf2_mapreduce.reducers.keys import *  # noqa: F403
from tf2_mapreduce.reducers.keys import __all__ as _keyed
from tf2_mapreduce.reducers.pieces import *  # noqa: F403
from tf2_mapreduce.reducers.pieces import __all__ as _per_piece
from tf2_mapreduce.reducers.statistics.reducer import *  # noqa: F403
from tf2_mapreduce.reducers.statistics.reducer import __all__ as _feature_stats
from tf2_mapreduce.reducers.vocabularies import *  # noqa: F403
from tf2_mapreduce.reducers.vocabularies import __all__ as _vocabularies

__all__ = [*_base, *_per_piece, *_keyed, *_vocabularies, *_feature_stats]
