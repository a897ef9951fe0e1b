"""failures.py reads TensorFlow's error text: checked on messages TensorFlow itself
produces (raised here by the same ops a map step runs) and on relayed messages
captured from real multi-process runs."""

import os

import pytest
import tensorflow as tf

from tf2_mapreduce.errors import ClusterError, JobFailed, op_error_cause
from tf2_mapreduce.inputs import readers
from tf2_mapreduce.run import failures
from tf2_mapreduce.state.counters import ChangedFiles

# A failed step as the coordinator received it in a real run (2 ps, 2 workers): one
# worker's range read of a file that shrank, relayed through ps 1.
RELAYED = (
    "2 root error(s) found.\n"
    "  (0) INVALID_ARGUMENT: {{function_node __inference_map_step_44994}} {{function_node "
    "__inference_map_step_44994_partitioned_17441761803842177793_2}} Excluding the header (609 bytes) and footer "
    '(6 bytes), input file "/tmp/pytest-of-root/pytest-24/test_a_file_changed_under_a_ra0/big.txt" has body length '
    "18446744073709551034 bytes, which is not an exact multiple of the record length (305 bytes).\n"
    "\t [[{{function_node map_while_body_44813}}{{node map/while/IteratorGetNext}}]]\n"
    "Additional GRPC error information from remote target /job:worker/replica:0/task:0 while calling "
    "/tensorflow.WorkerService/RecvTensor:\n"
    ':UNKNOWN:Error received from peer  {grpc_message:"Excluding the header", grpc_status:3}\n'
    "\t [[DynamicPartition_1/_12]]\n"
    "Additional GRPC error information from remote target /job:ps/replica:0/task:1/device:CPU:0 while calling "
    "/tensorflow.eager.EagerService/RunComponentFunction:\n"
    ':UNKNOWN:Error received from peer  {grpc_status:3, grpc_message:"..."}\n'
    "  (1) INVALID_ARGUMENT: {{function_node __inference_map_step_44994}} Excluding the header (609 bytes)\n"
    "0 successful operations.\n"
    "1 derived errors ignored."
)


def raised(fn):
    """The error `fn` raises. Callers pass a tf.function, so that ops run as in a map
    step: TF words some errors otherwise when they run eagerly."""
    try:
        fn()
    except tf.errors.OpError as e:
        return e
    raise AssertionError("no error raised")


def test_a_changed_file_fails_the_step_and_its_sizes_come_back_as_data():
    changed_files = ChangedFiles(10, "/cpu:0")
    ids = tf.constant([3, 7, 8], tf.int64)

    @tf.function(autograph=False)
    def step(read):
        with tf.control_dependencies([changed_files.check(ids, tf.constant([10, 10, 4], tf.int64), read)]):
            return tf.constant(0)

    step(tf.constant([10, 10, 4], tf.int64))
    assert changed_files.read() == {}
    error = raised(lambda: step(tf.constant([10, 12, 4], tf.int64)))
    assert isinstance(error, failures.FILE_ERRORS)
    assert changed_files.read() == {7: 12}


def test_a_missing_or_unreadable_file_is_named_with_its_cause(tmp_path):
    missing = str(tmp_path / "gone.txt")
    error = raised(tf.function(lambda: tf.io.read_file(missing)))
    assert isinstance(error, tf.errors.NotFoundError)
    assert failures.file_failure(op_error_cause(error), not_found=True) == failures.FileFailure(
        missing, "no such file or directory (it was there when the inputs were listed)"
    )
    directory = str(tmp_path)
    error = raised(tf.function(lambda: tf.io.read_file(directory)))
    assert isinstance(error, failures.FILE_ERRORS)
    failure = failures.file_failure(op_error_cause(error))
    assert failure.path == directory and failure.why


def test_a_file_that_changed_size_under_a_range_read_is_named(tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * 100)
    error = raised(tf.function(lambda: readers.read_range(tf.constant(str(path)), 10, 20, 120)))
    assert isinstance(error, failures.FILE_ERRORS)
    assert failures.file_failure(op_error_cause(error)) == failures.FileFailure(
        str(path), "changed size since it was listed"
    )


def test_a_relayed_error_names_its_input_and_the_ps_it_came_through():
    failure = failures.file_failure(op_error_cause(tf.errors.InvalidArgumentError(None, None, RELAYED)))
    assert failure.path == "/tmp/pytest-of-root/pytest-24/test_a_file_changed_under_a_ra0/big.txt"
    assert failure.why == "changed size since it was listed"
    assert failures.tasks_named(RELAYED) == [1]
    assert failures.tasks_named(RELAYED, "worker") == [0]
    assert failures.tasks_named("Socket closed") == []


FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures")


def fixture(name):
    """A message TensorFlow gave in a real run (`scripts/capture_missing_op.py`)."""
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("name", ["missing_op_eager.txt", "missing_op_scheduled.txt"])
def test_a_task_without_the_native_ops_is_told_apart_from_a_missing_file(name):
    message = fixture(name)
    error = tf.errors.NotFoundError(None, None, message)
    assert failures.missing_op(message) == "Tf2MapreduceFileSizes"
    assert failures.tasks_named(message, "worker") == [0] and failures.tasks_named(message) == []
    policy = failures.FailurePolicy("skip")
    assert policy.round(error, {}) == failures.MISSING_OP  # not an input's fault, though a NotFoundError
    stopped = policy.missing_op_error(error, {0: "host-a:2222", 1: "host-b:2222"}, "; checkpoint saved")
    assert isinstance(stopped, ClusterError)
    assert str(stopped).startswith(
        "worker 0 at host-a:2222 cannot run the map step: its process does not have the op Tf2MapreduceFileSizes"
    )
    assert str(stopped).endswith("TF2_MAPREDUCE_NATIVE=off; checkpoint saved")
    # A step that failed this way is never taken for its pieces' fault.
    decision = policy.steps(error, [([3], error)], {}, str, lambda piece: ("p", 1))
    assert decision.cluster is error and not decision.skip and decision.fail is None
    assert failures.missing_op(RELAYED) is None and failures.missing_op("no such file or directory") is None


def test_what_a_failed_round_is():
    policy = failures.FailurePolicy("fail")
    gone = tf.errors.NotFoundError(None, None, "/data/a.txt; No such file or directory")
    unreachable = tf.errors.UnavailableError(None, None, "Socket closed")
    assert policy.round(gone, {}) == failures.STEPS
    assert policy.round(unreachable, {}) == failures.RETRY
    assert policy.round(unreachable, {0: "connection refused"}) == failures.CLUSTER
    # Workers whose channel to a restarted ps is still in gRPC's backoff name it while it
    # answers again (seen in a rerun on the servers of a job whose ps was killed): a retry.
    backoff = tf.errors.UnavailableError(
        None,
        None,
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:43073: Failed to connect to "
        "remote host: Connection refused\nAdditional GRPC error information from remote target "
        "/job:ps/replica:0/task:0 while calling /tensorflow.eager.EagerService/RunComponentFunction:",
    )
    assert failures.tasks_named(backoff.message) == [0] and policy.round(backoff, {}) == failures.RETRY
    assert policy.round(gone, {1: "connection refused"}) == failures.CLUSTER  # a lost ps comes first
    assert policy.round(tf.errors.InternalError(None, None, "boom"), {}) == failures.CLUSTER
    in_part = tf.errors.InvalidArgumentError(None, None, "assertion failed: [%s]" % failures.COMMITTED_IN_PART)
    assert policy.round(in_part, {}) == failures.CLUSTER


def test_what_is_done_about_steps_that_failed_on_inputs():
    gone = tf.errors.NotFoundError(None, None, "/data/b.txt; No such file or directory")
    unreadable = tf.errors.PermissionDeniedError(None, None, "/data/c.txt; Permission denied")
    files = {4: ("/data/b.txt", 10), 5: ("/data/c.txt", 20), 6: ("/data/d.txt", 30)}
    failed = [([1, 2, 3], gone), ([4], gone), ([5], unreadable), ([6], gone)]
    changed = {6: 35}
    skip = failures.FailurePolicy("skip").steps(gone, failed, changed, lambda p: files[p][0], files.get)
    assert skip.regroup == [[1, 2, 3]] and skip.fail is None and skip.cluster is None
    assert skip.skip == {
        4: "no such file or directory (it was there when the inputs were listed)",
        5: "permission denied",
        6: "changed since it was listed (30 bytes then, 35 now)",
    }
    fail = failures.FailurePolicy("fail").steps(gone, failed, changed, lambda p: files[p][0], files.get)
    assert isinstance(fail.fail, JobFailed)
    assert (
        str(fail.fail)
        == "a map step failed: /data/b.txt: no such file or directory (it was there when the inputs were listed)"
    )
    # A round whose join() failed with no step of its own to blame fails the job as it is.
    nothing = failures.FailurePolicy("skip").steps(gone, [], {}, str, files.get)
    assert isinstance(nothing.fail, JobFailed) and "No such file or directory" in str(nothing.fail)


def test_a_misaligned_tfrecord_range_fails_the_job_whatever_on_error_says():
    # The native reader's words for a range whose last record runs past the next cut, and
    # for the range after that false cut: what looks like a corrupt record.
    path = "/data/one.tfrecord"
    misaligned = tf.errors.DataLossError(
        None,
        None,
        "%s; records do not line up at 2112: the record at 1600 is 550 bytes long, so the next one "
        "starts at 2166" % path,
    )
    corrupt = tf.errors.DataLossError(None, None, "%s; corrupted record at 2162" % path)
    pieces = {7: "%s (bytes 0-2112)" % path, 8: "%s (bytes 2112-3942)" % path}
    for on_error in ("skip", "fail"):
        decision = failures.FailurePolicy(on_error).steps(
            corrupt, [([8], corrupt), ([7], misaligned)], {}, pieces.get, lambda p: (path, 3942)
        )
        assert str(decision.fail) == (
            "a map step failed: %s (bytes 0-2112): records do not line up at 2112: the record at 1600 is 550 bytes "
            "long, so the next one starts at 2166 (a payload holds what looks like records: the file cannot be cut "
            "there, nor skipped in part; read it whole with read_size above its size)" % path
        )
    # A corrupt record alone is skipped as any input fault is.
    decision = failures.FailurePolicy("skip").steps(corrupt, [([8], corrupt)], {}, pieces.get, lambda p: (path, 3942))
    assert decision.fail is None and decision.skip == {8: "corrupted record at 2162"}


def test_an_output_that_cannot_be_written_is_named_with_its_spaces_and_fails_the_job():
    message = (
        "{{function_node __wrapped__}} tf2_mapreduce: cannot write output /data/My Drive/out/.tf2_mapreduce-pieces/"
        "3-77-0.tfrecord.gz: /data/My Drive/out/.tf2_mapreduce-pieces/3-77-0.tfrecord.gz; No space left on device\n"
        "\t [[{{node Tf2MapreduceWriteRecords}}]]"
    )
    error = failures.output_failure(message)
    assert error.path == "/data/My Drive/out/.tf2_mapreduce-pieces/3-77-0.tfrecord.gz"
    assert error.reason.endswith("; No space left on device")
    policy = failures.FailurePolicy("skip")
    op_error = tf.errors.FailedPreconditionError(None, None, message)
    assert policy.round(op_error, {}) == failures.OUTPUT_FAULT
    decision = policy.steps(op_error, [([3], op_error)], {}, str, lambda piece: ("in.tfrecord", 10))
    assert decision.fail is not None and not decision.skip  # never an input skipped for it
