"""TensorFlow's start-up lines are kept off stderr, and nothing else is: checked on
lines captured from TensorFlow 2.21 on a CPU-only machine. (A real import, README's
Python example and the scripts: cluster/test_quiet_python.py.)"""

import logging

from tf2_mapreduce.quiet import cut_record, is_hidden_record, is_startup_noise

CAPTURED_NOISE = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795372620.346585    5279 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors from different computation orders. "
    "To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.",
    "I0000 00:00:1795372620.347177    5279 cudart_stub.cc:31] Could not find cuda drivers on your machine, "
    "GPU will not be used.",
    "E0000 00:00:1795372622.189733    5279 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
    "Failed call to cuInit: UNKNOWN ERROR (303)",
    "I0000 00:00:1795372620.435410    5279 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use "
    "available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 FMA, in other operations, "
    "rebuild TensorFlow with the appropriate compiler flags.",
]

REAL_ERRORS = [
    "E0000 00:00:1795369316.507431   23788 context.cc:873] Failed to register function remotely due to "
    "recvmsg:Connection reset by peer",
    "F0000 00:00:1795372620.000000    5279 port.cc:153] Check failed: oneDNN custom operations are on.",
    "Traceback (most recent call last):",
    "ImportError: libcudart.so.12: cannot open shared object file",
    "2026-11-22 18:00:00.000000: W tensorflow/core/framework/op_kernel.cc:1840] OP_REQUIRES failed",
]


def test_captured_start_up_lines_are_noise_and_real_errors_are_not():
    assert [line for line in CAPTURED_NOISE if not is_startup_noise(line)] == []
    assert [line for line in REAL_ERRORS if is_startup_noise(line)] == []


# TensorFlow 2.21's records the run says better itself, as logged: source file and the first
# lines of each message. ClusterCoordinator's of a failed map step (a corrupt TFRecord file)
# and of a ps killed mid-step (the run fails naming it); the checkpoint saver's of its own
# retracing.
COORDINATOR = "/venv/lib/python3.11/site-packages/tensorflow/python/distribute/coordinator/cluster_coordinator.py"
FUNCTION = "/venv/lib/python3.11/site-packages/tensorflow/python/eager/polymorphic_function/polymorphic_function.py"
HIDDEN = [
    (
        COORDINATOR,
        " /job:worker/task:1 encountered the following error when processing closure: DataLossError():Graph "
        "execution error:\n\nDetected at node map/while/ReduceDataset defined at (most recent call last):",
    ),
    (COORDINATOR, "Start cancelling closures due to error DataLossError(): Graph execution error:"),
    (
        COORDINATOR,
        "Remote function on worker /job:worker/replica:0/task:0 failed with UnavailableError():Graph execution "
        "error:\n\nrecvmsg:Connection reset by peer\nIt is treated as a transient connectivity failure for now.",
    ),
    (
        FUNCTION,
        "5 out of the last 5 calls to <function MultiDeviceSaver.save.<locals>.tf_function_save at 0x7ffb401cb880> "
        "triggered tf.function retracing. Tracing is expensive and the excessive number of tracings could be due to",
    ),
]
OTHER_RECORDS = [
    (COORDINATOR, "Waiting for all global closures to be finished."),
    (COORDINATOR, "/job:worker/replica:0/task:1 has been recovered."),
    ("/venv/lib/python3.11/site-packages/tensorflow/python/eager/context.py", HIDDEN[0][1]),
    # A user's function traced again: theirs to see.
    (FUNCTION, "5 out of the last 5 calls to <function preprocessing_fn at 0x7f00> triggered tf.function retracing."),
]


def test_the_records_the_run_says_better_are_told_apart_from_the_others():
    assert [message for path, message in HIDDEN if not is_hidden_record(path, message)] == []
    assert [message for path, message in OTHER_RECORDS if is_hidden_record(path, message)] == []


def test_a_lost_workers_record_is_cut_to_its_first_line():
    lost = (
        "Worker /job:worker/replica:0/task:0 failed with UnavailableError():Socket closed\nAdditional GRPC error "
        "information from remote target /job:worker/replica:0/task:0 while calling /tensorflow.eager.EagerService/Enqueue:"
    )
    assert not is_hidden_record(COORDINATOR, lost)
    assert (
        cut_record(COORDINATOR, lost)
        == "Worker /job:worker/replica:0/task:0 failed with UnavailableError():Socket closed"
    )
    assert [message for _, message in HIDDEN + OTHER_RECORDS if cut_record(COORDINATOR, message)] == []
    assert cut_record(FUNCTION, lost) is None


def test_the_filter_cuts_hides_and_never_raises_into_tensorflow():
    from tf2_mapreduce.quiet import _Hidden

    def record(pathname, msg, args):
        return logging.LogRecord("tensorflow", logging.ERROR, pathname, 949, msg, args, None)

    lost = record(COORDINATOR, "Worker %s failed with %r:%s", ("/job:worker/replica:0/task:1", "E()", "a\nb"))
    assert _Hidden().filter(lost) and lost.getMessage() == "Worker /job:worker/replica:0/task:1 failed with 'E()':a"
    assert not _Hidden().filter(record(FUNCTION, HIDDEN[-1][1], ()))
    broken = record(COORDINATOR, "Worker %s failed with %r:%s", ("too few",))  # TensorFlow's mistake, shown as is
    assert _Hidden().filter(broken)
