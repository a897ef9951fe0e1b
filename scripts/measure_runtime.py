"""Re-measures the TensorFlow runtime facts behind "a run's state on the ps belongs to that run"
(docs/runtime.md, R1-R5): prints what was seen, PASS or FAIL per fact; exit status 1 if any differs."""

import argparse
import json
import os
import socket
import subprocess
import sys
import time

from tf2_mapreduce.cluster import orphans

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PS = "/job:ps/replica:0/task:0/device:CPU:0"
SERVER_START_TIMEOUT = 60  # seconds for both servers to accept connections
COORDINATOR_TIMEOUT = 120  # seconds for one coordinator process, import of TensorFlow included

# What the second coordinator reads before writing, as docs/runtime.md states it:
# (id, key in a coordinator's report, expected value, the fact).
FACTS = [
    ("R1", "default_table", 1, "MutableHashTable made eagerly (table_<n>): the new process gets the old one's entries"),
    ("R2", "run_table", 0, "state.count_table.RunTable with a fresh shared name per run: new and empty"),
    ("R3", "variable", 0, "tf.Variable made eagerly, same name= in both processes: new, initial value"),
    ("R4", "kept_table", 1, "a table of a fixed shared name outlives the process that made it"),
    ("R5", "released_table", 0, "the same, freed by DestroyResourceOp: the name is then a new, empty table"),
]


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _accepts(address):
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1.0).close()
        return True
    except OSError:
        return False


def as_server(jobs, role):
    """A bare ps or worker task, configured as tf2_mapreduce configures its servers."""
    import tensorflow as tf

    # Fewer inter-op threads than workers + 1 deadlocks schedule()/join() on a
    # 2-core machine (cluster.server_config sets the same).
    config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=max(len(jobs["worker"]) + 1, os.cpu_count()))
    server = tf.distribute.Server(
        tf.train.ClusterSpec(jobs), job_name=role, task_index=0, protocol="grpc", config=config, start=True
    )
    server.join()  # until the script kills it: TF's gRPC servers have no working stop()


def as_coordinator(jobs, run):
    """One coordinator process: connects as chief, as cluster.chief.connect does, makes each
    resource on the ps, reads it, writes to it, prints a JSON report and dies
    without any teardown, as a killed coordinator does."""
    import uuid

    import tensorflow as tf

    from tf2_mapreduce.state.count_table import RunTable

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(jobs), task_type="chief", task_id=0, rpc_layer="grpc"
    )
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    tf.distribute.coordinator.ClusterCoordinator(strategy)
    # Outside the strategy's scope, as slots.py and tables.py make a run's state: the device scope holds.
    with tf.device(PS):
        tables = {
            # TF names it "table_<n>", n from a per-process counter: the same n in both
            # processes, since both run this same code.
            "default_table": tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, default_value=0),
            "run_table": RunTable("measure_runtime/%s/table" % uuid.uuid4().hex),
            "kept_table": RunTable("measure_runtime/kept"),
            "released_table": RunTable("measure_runtime/released"),
        }
        # PerPieceState names its slots so; the name given is not the resource's name.
        variable = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="slots_0")
    before = {key: int(table.size()) for key, table in tables.items()}
    before["variable"] = int(variable.numpy())
    for table in tables.values():
        table.insert(tf.constant([b"a"]), tf.constant([1], tf.int64))
    variable.assign_add(1)
    # Read back, so every write has reached the ps before this process dies.
    after = {key: int(table.size()) for key, table in tables.items()}
    after["variable"] = int(variable.numpy())
    if run == 1:
        # As state.base.destroy frees a run's state: eager runs it on the resource's device.
        tf.raw_ops.DestroyResourceOp(resource=tables["released_table"].resource_handle, ignore_lookup_error=False)
        try:
            tables["released_table"].size().numpy()
            after["released_table"] = "still there"
        except tf.errors.NotFoundError:
            after["released_table"] = "freed"
    print(json.dumps({"before": before, "after": after}), flush=True)
    sys.stdout.flush()
    # No interpreter teardown: Python's finalizers could free resources on the ps.
    os._exit(0)


def _run_coordinator(jobs, run, env):
    args = [sys.executable, os.path.abspath(__file__), "--as_coordinator", str(run), "--jobs", json.dumps(jobs)]
    try:
        out = subprocess.run(
            args,
            env=env,
            cwd=REPO,
            capture_output=True,
            timeout=COORDINATOR_TIMEOUT,
            preexec_fn=orphans.dying_with(os.getpid()),
        )
    except subprocess.TimeoutExpired:  # subprocess.run has killed and reaped it
        raise RuntimeError("coordinator %d took over %ds" % (run, COORDINATOR_TIMEOUT)) from None
    lines = out.stdout.decode(errors="replace").strip().splitlines()
    if out.returncode or not lines:
        raise RuntimeError(
            "coordinator %d failed (exit %d): %s" % (run, out.returncode, out.stderr.decode(errors="replace")[-3000:])
        )
    return json.loads(lines[-1])


def measure():
    jobs = {role: ["localhost:%d" % _free_port()] for role in ("chief", "ps", "worker")}
    # TF's guide asks for it on every task of a parameter-server cluster; tf2_mapreduce sets it.
    env = dict(
        os.environ,
        GRPC_FAIL_FAST="use_caller",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
    )
    servers = []
    try:
        for role in ("ps", "worker"):
            servers.append(
                subprocess.Popen(
                    [sys.executable, os.path.abspath(__file__), "--as_server", role, "--jobs", json.dumps(jobs)],
                    env=env,
                    cwd=REPO,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    preexec_fn=orphans.dying_with(os.getpid()),
                )
            )
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while not all(_accepts(jobs[role][0]) for role in ("ps", "worker")):
            if any(server.poll() is not None for server in servers):
                raise RuntimeError("a server exited at start: %s" % [server.returncode for server in servers])
            if time.monotonic() > deadline:
                raise RuntimeError("the servers did not accept connections within %ds" % SERVER_START_TIMEOUT)
            time.sleep(0.2)
        # One after the other, against the same servers: the second is a rerun.
        return [_run_coordinator(jobs, run, env) for run in (1, 2)]
    finally:
        for server in servers:
            if server.poll() is None:
                server.kill()
            server.wait(30)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--as_server", help=argparse.SUPPRESS)
    parser.add_argument("--as_coordinator", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--jobs", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.as_server:
        return as_server(json.loads(args.jobs), args.as_server)
    if args.as_coordinator:
        return as_coordinator(json.loads(args.jobs), args.as_coordinator)

    started = time.monotonic()
    try:
        first, second = measure()
    except RuntimeError as e:
        print("FAIL  could not measure: %s" % e)
        return 1
    failed = 0
    # The first coordinator must find a new ps empty and see its own writes, or
    # nothing the second one reads means anything.
    sane = (
        not any(first["before"].values())
        and all(first["after"][key] == 1 for key in ("default_table", "run_table", "kept_table", "variable"))
        and first["after"]["released_table"] == "freed"
    )
    failed += not sane
    print(
        "%s  R0 first coordinator on a new ps: read %s, then %s"
        % ("PASS" if sane else "FAIL", first["before"], first["after"])
    )
    for fact_id, key, expected, fact in FACTS:
        seen = second["before"][key]
        failed += seen != expected
        print(
            "%s  %s %s: second coordinator read %d (docs/runtime.md: %d)"
            % ("PASS" if seen == expected else "FAIL", fact_id, fact, seen, expected)
        )
    print(
        "SKIP  R6 tf.CriticalSection(name=...) without shared_name: its mutex handle is not public API "
        "(docs/runtime.md)"
    )
    print(
        "%d of %d facts as documented, in %.1f s"
        % (len(FACTS) + 1 - failed, len(FACTS) + 1, time.monotonic() - started)
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
