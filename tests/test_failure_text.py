"""failures.py reads TensorFlow's error text: checked on messages TensorFlow itself
produces (raised here by the same ops a map step runs) and on relayed messages
captured from real multi-process runs."""

import tensorflow as tf

from tf2_mapreduce import failures, mapstep
from tf2_mapreduce.errors import op_error_cause
from tf2_mapreduce.run_state import ChangedFiles

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
    error = raised(tf.function(lambda: mapstep.read_range(tf.constant(str(path)), 10, 20, 120)))
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
