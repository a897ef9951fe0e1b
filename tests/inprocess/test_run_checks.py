"""A run on the in-process cluster checks what it is given before it starts: unknown
options and anything but a Job are refused; a spec given alone is a list of one."""

import os

import pytest
from helpers.corpora import SAMPLE

import tf2_mapreduce as mr


def test_a_run_with_an_unknown_option_or_no_job_is_refused_before_it_starts(inprocess):
    with pytest.raises(TypeError, match=r"unknown option\(s\) on_eror"):
        inprocess.run(mr.WordCount(), [SAMPLE], on_eror="skip")
    with pytest.raises(TypeError, match="job must be a tf2_mapreduce Job"):
        inprocess.run("wordcount", [SAMPLE])
    assert inprocess.run(mr.WordCount(), SAMPLE).files_done == len(os.listdir(SAMPLE))
