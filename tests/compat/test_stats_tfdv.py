"""Our stats job's stats.pb against TFDV 1.16.1 itself (in its venv: scripts/compare_tfdv.py) over
the same awkward examples: TFDV loads ours, infers a schema and renders its page from it, and
every figure both compute exactly is equal (mean and deviation within 1e-9, relative)."""

import json
import os

import pytest
from helpers.corpora import write_awkward
from helpers.processes import SCRIPTS
from peers import made_once, run_peer

import tf2_mapreduce as mr

pytestmark = [pytest.mark.compat, pytest.mark.cluster]

PEER_TIMEOUT = 240  # TFDV's import and its Beam run took 9 s on a loaded 2-core machine
OURS_TIMEOUT = 120  # our job: 4 s
FEATURES = ["constant", "query", "rare", "score", "unset", "user_id"]


@pytest.fixture(scope="module")
def report(tfdv_python, inprocess, tmp_path_factory, worker_id):
    def make():
        work = tmp_path_factory.mktemp("stats_tfdv")
        raw = work / "raw"
        raw.mkdir()
        inprocess.run(mr.Stats(), write_awkward(raw)).write_dir(str(work / "ours"))
        path = str(work / "report.json")
        args = [os.path.join(SCRIPTS, "compare_tfdv.py"), "--stats", str(work / "ours" / "stats.pb")]
        args += ["--report", path, str(raw / "part-*")]
        run_peer(tfdv_python, args, str(work / "compare_tfdv.log"), PEER_TIMEOUT)
        with open(path) as f:
            return json.load(f)

    return made_once(tmp_path_factory, worker_id, "compare_tfdv", make, PEER_TIMEOUT + OURS_TIMEOUT)


def test_tfdv_reads_ours_infers_a_schema_and_renders_it(report):
    assert report["features"]["ours"] == FEATURES
    assert report["schema_features"] == FEATURES
    assert report["html_chars"] > 1000


def test_every_exact_figure_is_tfdvs(report):
    """Counts, types, min, max, zeros, NaN, distinct and top values, the rank histogram, mean
    and deviation, feature by feature (compare_tfdv.compare): NaN, infinities, -0.0, int64's
    extremes, values that are not UTF-8, lists with no value and a Feature with none set."""
    assert report["num_examples"]["ours"] == report["num_examples"]["tfdv"] > 500
    assert report["features"]["ours"] == report["features"]["tfdv"]
    assert report["differences"] == []
