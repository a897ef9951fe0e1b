"""The native op a worker joins a data/ shard with (native/join_files.cc): a head, the
files in order and a tail, put in place whole under the target's name; a file that is gone
named as the coordinator says it; other sizes than committed refused; what a run again or
a failed one leaves. Against plain Python bytes."""

import os
import random

import pytest
import tensorflow as tf

from tf2_mapreduce import native
from tf2_mapreduce.outputs.sinks import shards
from tf2_mapreduce.run import failures


def join(paths, head, tail, temporary_dir, target, size=None):
    """The op, told the size the files make (`size`: what they are, by default)."""
    if size is None:
        size = len(head) + sum(os.path.getsize(p) for p in paths if os.path.exists(p)) + len(tail)
    files = tf.constant(paths, tf.string, [len(paths)])
    return int(native.load().tf2_mapreduce_join_files(files, head, tail, size, temporary_dir, target))


def files(directory, sizes, seed=0):
    """Files of `sizes` bytes of random bytes: (paths, their bytes)."""
    rng = random.Random(seed)
    paths, contents = [], []
    for n, size in enumerate(sizes):
        data = rng.randbytes(size)
        path = os.path.join(directory, "piece-%d" % n)
        with open(path, "wb") as f:
            f.write(data)
        paths.append(path)
        contents.append(data)
    return paths, contents


@pytest.mark.parametrize("sizes", [[], [0], [1, 0, 7], [(4 << 20) - 1, 4 << 20, (4 << 20) + 1, 3]])
def test_a_shard_is_the_head_the_files_in_order_and_the_tail(tmp_path, sizes):
    paths, contents = files(str(tmp_path), sizes)
    target = str(tmp_path / "part")
    written = join(paths, b"HEAD", b"TAIL", str(tmp_path), target)
    expected = b"HEAD" + b"".join(contents) + b"TAIL"
    assert written == len(expected)
    with open(target, "rb") as f:
        assert f.read() == expected
    # Written aside, then renamed: no temporary file is left beside the pieces.
    assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(p) for p in paths] + ["part"])


def test_run_again_it_replaces_the_shard_with_the_same_bytes(tmp_path):
    paths, contents = files(str(tmp_path), [100, 200], seed=1)
    target = str(tmp_path / "part")
    with open(target, "wb") as f:
        f.write(b"a shard cut short by a worker that died")
    for _ in range(2):
        join(paths, b"", b"", str(tmp_path), target)
        with open(target, "rb") as f:
            assert f.read() == b"".join(contents)


def test_a_piece_file_gone_is_named_as_the_coordinator_reads_it(tmp_path):
    paths, _ = files(str(tmp_path), [10])
    gone = str(tmp_path / "a piece: gone")  # a space and a colon in its name
    with pytest.raises(tf.errors.NotFoundError) as raised:
        join(paths + [gone], b"", b"", str(tmp_path), str(tmp_path / "part"))
    failure = shards._gone(raised.value)
    assert failure.path == gone and "is gone" in str(failure)
    assert not os.path.exists(tmp_path / "part")
    assert [name for name in os.listdir(tmp_path) if name.startswith("join-")] == []


def test_files_of_other_sizes_than_committed_are_never_put_in_place(tmp_path):
    paths, _ = files(str(tmp_path), [10, 20])
    target = str(tmp_path / "part")
    with pytest.raises(tf.errors.FailedPreconditionError) as raised:
        join(paths, b"", b"", str(tmp_path), target, size=31)
    failure = failures.output_failure(raised.value.message)
    assert failure.path == target and "31 bytes were committed, 30 found" in failure.reason, failure
    assert sorted(os.listdir(tmp_path)) == ["piece-0", "piece-1"]


def test_a_target_that_cannot_be_written_fails_naming_it(tmp_path):
    paths, _ = files(str(tmp_path), [10])
    target = str(tmp_path / "no-such-dir" / "part")
    with pytest.raises(tf.errors.FailedPreconditionError) as raised:
        join(paths, b"", b"", str(tmp_path), target)
    failure = failures.output_failure(raised.value.message)
    assert failure.path == target, failure


def test_while_a_map_step_is_still_in_flight_this_process_joins_the_shards(tmp_path):
    # TF's queue is held by a step stuck on a worker cut off: nothing is scheduled behind it.
    from tf2_mapreduce.run.on_workers import OnWorkers

    paths, contents = files(str(tmp_path), [5, 6, 7], seed=2)
    here = OnWorkers(coordinator=None, stall=None, stopped=lambda: None, free=lambda: False)
    arguments = [
        (
            tf.constant(chosen, tf.string, [len(chosen)]),
            b"H",
            b"T",
            2 + sum(map(os.path.getsize, chosen)),
            str(tmp_path),
            str(tmp_path / name),
        )
        for chosen, name in [(paths[:2], "a"), (paths[2:], "b")]
    ]
    assert here.each(shards._joined(), arguments, str(tmp_path)) == [13, 9]
    assert (tmp_path / "a").read_bytes() == b"H" + contents[0] + contents[1] + b"T"
    assert (tmp_path / "b").read_bytes() == b"H" + contents[2] + b"T"
