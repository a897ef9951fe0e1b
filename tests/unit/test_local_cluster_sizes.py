"""The local cluster's sizes are checked before anything starts."""

import pytest

from tf2_mapreduce.cluster import local as local_cluster
from tf2_mapreduce.errors import UsageError


def test_sizes_are_checked():
    with pytest.raises(UsageError, match="at least 1 ps and 1 worker"):
        local_cluster.local_spec(num_ps=0, num_workers=2)
