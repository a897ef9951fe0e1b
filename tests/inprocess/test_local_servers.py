"""In-process servers share one inter-op thread pool, sized by the first started
(docs/runtime.md): the local cluster must size it for all of them."""

import os
import subprocess
import sys

from helpers.processes import task_env

# Starts the in-process servers of a 1 ps, 2 worker cluster in a fresh process (the
# pool is made once per process) and counts the pool's threads, named tf_Compute.
COUNT = """
import os
from tf2_mapreduce.cluster.local import InProcessServers, local_spec
def pool():
    return sum(open("/proc/self/task/%s/comm" % t).read().strip() == "tf_Compute" for t in os.listdir("/proc/self/task"))
import tensorflow
before = pool()
InProcessServers(local_spec(1, 2)).start()
print(pool() - before)
"""


def test_in_process_servers_get_inter_op_threads_for_every_task():
    out = subprocess.run(
        [sys.executable, "-c", COUNT], env=task_env(), capture_output=True, text=True, timeout=120, check=True
    )
    # Three servers, each needing workers + 1 = 3: one shared pool of 9, not 3 pools of 3.
    assert int(out.stdout.split()[-1]) == max(3 * 3, os.cpu_count() or 1), out.stderr
