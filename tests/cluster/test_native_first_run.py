"""The first run on a machine builds the native ops and says so; where they cannot be built
(no compiler), the fallback is said once and the result still exact, and
TF2_MAPREDUCE_NATIVE=require refuses to go without them."""

import os
import re

from helpers.corpora import SAMPLE
from helpers.oracles import oracle_words
from helpers.processes import run_cli, task_env


def test_the_first_run_says_it_builds_the_native_ops_and_a_failed_build_is_said_once(tmp_path):
    """A machine without a compiler (CXX=false) and nothing built yet: the build is said
    first, then one warning naming what is weaker, and the result is still exact."""
    env = task_env(CXX="false", TF2_MAPREDUCE_CACHE=str(tmp_path / "cache"))
    run = run_cli([], env=env)
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert re.fullmatch(
        r"tf2_mapreduce: building the native ops for TensorFlow 2\.\d+: once per machine, about \d+ s\.\.\.",
        lines[0],
    ), lines[0]
    assert lines[1].startswith(
        "tf2_mapreduce: warning: going without tf2_mapreduce's native ops (false failed: exit 1)"
    )
    assert "gzip/zlib-compressed and TFRecord inputs are refused" in lines[1]
    assert sum("native ops" in line for line in lines) == 2
    paths = sorted(os.path.join(SAMPLE, name) for name in os.listdir(SAMPLE))
    assert run.stdout.startswith("wordcount: %d words in %d files" % (oracle_words(paths), len(paths)))
    required = run_cli([], env=dict(env, TF2_MAPREDUCE_NATIVE="require"))
    assert required.returncode == 2
    assert required.stderr.splitlines()[-1] == (
        "tf2_mapreduce: error: TF2_MAPREDUCE_NATIVE=require, but tf2_mapreduce's native ops cannot be used here: "
        "false failed: exit 1"
    )
    assert "started a local cluster" not in required.stderr
