"""The native reads (tf2_mapreduce/native/read_range.cc), built on this machine: a range
costs its own bytes wherever it starts, its bytes are the file's, and a file of another
size than listed is refused by name; a batch of whole files is read as tf.io.read_file
reads each, errors included. Bytes read are counted by the kernel (/proc/self/io), not
timed."""

import os

import pytest
import tensorflow as tf

from tf2_mapreduce import native
from tf2_mapreduce.errors import op_error_cause
from tf2_mapreduce.inputs import readers
from tf2_mapreduce.run import failures

READ = tf.function(readers.read_range, autograph=False)
READ_THROUGH = tf.function(readers.read_range_through, autograph=False)


def bytes_read():
    """Bytes this process has read with read(2) and pread(2) so far (the kernel's rchar)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))


def read(fn, path, start, end, size):
    return fn(
        tf.constant(str(path)), tf.constant(start, tf.int64), tf.constant(end, tf.int64), tf.constant(size, tf.int64)
    )


@pytest.fixture(scope="module")
def sparse_file(tmp_path_factory):
    """A 4 GiB file that is all hole but its last 5 bytes: it costs no disk."""
    path = tmp_path_factory.mktemp("sparse") / "big.bin"
    size = 4 << 30
    with open(path, "wb") as f:
        f.truncate(size - 5)
        f.seek(size - 5)
        f.write(b"tail!")
    return path, size


def test_the_native_op_is_built_here():
    assert native.load() is not None, native.unavailable()


def test_a_range_at_the_end_of_a_large_file_costs_its_own_bytes(sparse_file):
    path, size = sparse_file
    read(READ, path, 0, 1, size)  # traced, and the file opened once, before counting
    before = bytes_read()
    contents = read(READ, path, size - 1000, size, size).numpy()
    used = bytes_read() - before
    assert contents == b"\0" * 995 + b"tail!"
    assert used < 1 << 20, "read %d bytes for a range of 1000" % used


def test_without_it_tf_reads_through_everything_before_the_range(sparse_file):
    # The fact the native op exists for (docs/runtime.md), measured again.
    path, size = sparse_file
    start = 256 << 20
    read(READ_THROUGH, path, 0, 1, size)
    before = bytes_read()
    contents = read(READ_THROUGH, path, start, start + 1000, size).numpy()
    assert contents == b"\0" * 1000
    assert bytes_read() - before >= start


def test_ranges_are_the_files_bytes(tmp_path):
    data = os.urandom(3 << 20)
    path = tmp_path / "random.bin"
    path.write_bytes(data)
    for start, end in [(0, 0), (0, 1), (17, 4096), (1 << 20, (1 << 20) + 12345), (len(data) - 3, len(data))]:
        assert read(READ, path, start, end, len(data)).numpy() == data[start:end]


def test_a_file_of_another_size_is_refused_by_name(tmp_path):
    path = tmp_path / "grew.txt"
    path.write_bytes(b"x" * 150)
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        read(READ, path, 10, 20, 120)
    failure = failures.file_failure(op_error_cause(e.value))
    assert failure == failures.FileFailure(str(path), "changed size since it was listed")


@pytest.fixture(params=["native", "tf"])
def read_files(request, monkeypatch):
    if request.param == "tf":
        monkeypatch.setattr(native, "load", lambda: None)
    return tf.function(readers.read_files, autograph=False)


def test_whole_files_are_read_as_read_file_reads_them(tmp_path, read_files):
    contents = [b"", b"one", os.urandom(1 << 20), b"\n" * 4097]
    paths = []
    for number, data in enumerate(contents):
        paths.append(str(tmp_path / ("f%d" % number)))
        with open(paths[-1], "wb") as f:
            f.write(data)
    assert read_files(tf.constant(paths)).numpy().tolist() == contents
    assert read_files(tf.constant([], tf.string)).numpy().tolist() == []


@pytest.mark.parametrize("make", ["missing", "directory"])
def test_a_file_that_cannot_be_read_fails_as_read_file_fails(tmp_path, read_files, make):
    good = tmp_path / "good.txt"
    good.write_bytes(b"fine")
    bad = tmp_path / "bad"
    if make == "directory":
        bad.mkdir()
    with pytest.raises(tf.errors.OpError) as ours:
        read_files(tf.constant([str(good), str(bad)]))
    with pytest.raises(tf.errors.OpError) as theirs:
        tf.function(tf.io.read_file)(tf.constant(str(bad)))
    assert type(ours.value) is type(theirs.value)
    assert failures.file_failure(op_error_cause(ours.value)) == failures.file_failure(op_error_cause(theirs.value))
    assert failures.file_failure(op_error_cause(ours.value)).path == str(bad)
