"""Writes one TF_CONFIG shell file per task of a cluster, as in the original post.

    python scripts/make_configs.py --out_dir configs --num_workers 2
    source configs/config_ps_0.sh && python -m tf2_mapreduce.server   # one shell per task

Tasks get consecutive ports from --base_port on --host (chief first, then ps, then
workers), or explicit addresses with --chief_host / --ps_hosts / --worker_hosts.
"""

import os
import re

from absl import app, flags

from tf2_mapreduce.cluster import spec as cluster_spec

FLAGS = flags.FLAGS
flags.DEFINE_string("out_dir", ".", "Directory to write config_<role>_<index>.sh files into.")
flags.DEFINE_string("host", "localhost", "Host of every task when explicit addresses are not given.")
flags.DEFINE_integer("base_port", 2222, "Port of the chief; the other tasks take the next ports.", lower_bound=1)
flags.DEFINE_integer("num_ps", 1, "Number of ps tasks.", lower_bound=1)
flags.DEFINE_integer("num_workers", 2, "Number of worker tasks.", lower_bound=1)
flags.DEFINE_string("chief_host", None, "host:port of the chief (coordinator).")
flags.DEFINE_list("ps_hosts", None, "Comma-separated host:port of the ps tasks.")
flags.DEFINE_list("worker_hosts", None, "Comma-separated host:port of the worker tasks.")

# Shell-safe as-is inside single quotes; also rules out typos such as "host:port,".
ADDRESS = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$")


def build_cluster():
    explicit = [FLAGS.chief_host, FLAGS.ps_hosts, FLAGS.worker_hosts]
    if any(explicit):
        if not all(explicit):
            raise app.UsageError("--chief_host, --ps_hosts and --worker_hosts go together")
        cluster = {"chief": [FLAGS.chief_host], "ps": FLAGS.ps_hosts, "worker": FLAGS.worker_hosts}
    else:
        ports = iter(range(FLAGS.base_port, FLAGS.base_port + 1 + FLAGS.num_ps + FLAGS.num_workers))
        cluster = {
            role: ["%s:%d" % (FLAGS.host, next(ports)) for _ in range(count)]
            for role, count in (("chief", 1), ("ps", FLAGS.num_ps), ("worker", FLAGS.num_workers))
        }
    addresses = [a for role in cluster.values() for a in role]
    for address in addresses:
        match = ADDRESS.match(address)
        if not match or not 0 < int(match.group(2)) < 65536:
            raise app.UsageError("%r is not host:port" % address)
    if len(set(addresses)) != len(addresses):
        raise app.UsageError("two tasks share an address: %s" % ", ".join(addresses))
    return cluster


def config_script(cluster, role, index):
    tf_config = cluster_spec.ClusterSpec(cluster, role, index).tf_config(role, index, indent=2)
    command = "python -m tf2_mapreduce.%s" % ("coordinator --input ..." if role == "chief" else "server")
    return (
        "# TF_CONFIG for %s %d; source this file, then run: %s\n"
        "export TF_CONFIG='%s'\n"
        "# Word counting needs no GPU; keep TF from claiming one.\n"
        "export CUDA_VISIBLE_DEVICES=-1\n" % (role, index, command, tf_config)
    )


def main(argv):
    if len(argv) > 1:
        raise app.UsageError("unexpected arguments: %s" % " ".join(argv[1:]))
    cluster = build_cluster()
    os.makedirs(FLAGS.out_dir, exist_ok=True)
    for role, addresses in cluster.items():
        for index in range(len(addresses)):
            path = os.path.join(FLAGS.out_dir, "config_%s_%d.sh" % (role, index))
            with open(path, "w") as f:
                f.write(config_script(cluster, role, index))
            print(path)
    return 0


if __name__ == "__main__":
    app.run(main)
