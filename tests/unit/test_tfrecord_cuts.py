"""An uncompressed TFRecord file of records of random sizes (0 bytes to several MB) whose
payloads hold valid-looking headers, planned into byte ranges: every cut falls on a record's
true start (framed here in plain Python), the first one past each range's target."""

import pytest
from helpers.corpora import PLANTED_READ_SIZE as READ_SIZE
from helpers.corpora import write_planted_tfrecord
from helpers.oracles import record_starts

from tf2_mapreduce.inputs.listing import expand
from tf2_mapreduce.inputs.plan import Plan


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    """One uncompressed TFRecord file of about 14 MB: mostly small examples, some empty
    ones (0 bytes), some of up to 3 MB, payloads planted with headers that check."""
    return write_planted_tfrecord(str(tmp_path_factory.mktemp("ranges") / "one.tfrecord"))


def test_cuts_fall_on_records_starts_whatever_the_payloads_hold(big_file):
    files = expand([big_file]).files
    plan = Plan(files, READ_SIZE, "tfrecord")
    starts = set(record_starts(big_file))
    cuts = [p.start for p in plan.pieces] + [plan.pieces[-1].end]
    assert len(plan.pieces) > 30
    assert cuts[0] == 0 and cuts[-1] == files[0].size
    assert all(a < b for a, b in zip(cuts, cuts[1:]))
    assert set(cuts) <= starts, sorted(set(cuts) - starts)
    # A record longer than a piece: the cut after it is the first start past it.
    for cut, following in zip(cuts, cuts[1:]):
        first_after_target = min(s for s in starts if s >= min(cut + READ_SIZE, files[0].size))
        assert following == first_after_target
