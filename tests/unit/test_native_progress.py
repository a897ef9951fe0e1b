"""The native ops' build as a first run says it (`native`): before it starts, what it
takes; a line at each interval while the compiler runs; how long it took once it is done; or one error naming the compiler."""

import logging
import os
import re
import stat

import pytest

from tf2_mapreduce import native


def compiler(tmp_path, body):
    path = tmp_path / "fake-c++"
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


# Writes the file after -o after 0.3 s: several of the test's intervals.
SLOW = 'while [ $# -gt 0 ]; do if [ "$1" = -o ]; then out=$2; fi; shift; done; sleep 0.3; echo built > "$out"\n'


@pytest.fixture
def said(caplog):
    caplog.set_level(logging.INFO, logger="tf2_mapreduce")
    return lambda: [str(record.msg) for record in caplog.records if record.name == "tf2_mapreduce"]


def test_a_build_says_what_it_takes_that_it_goes_on_and_what_it_took(tmp_path, monkeypatch, said):
    monkeypatch.setattr(native, "PROGRESS_EVERY", 0.05)
    monkeypatch.setenv("CXX", compiler(tmp_path, SLOW))
    library = str(tmp_path / "cache" / "ops-test.so")
    assert native._build_announced(library) is None and os.path.exists(library)
    lines = said()
    assert re.fullmatch(r"building the native ops for TensorFlow 2\.\d+: once per machine, about \d+ s\.\.\.", lines[0])
    going = lines[1:-1]
    assert going and all(re.fullmatch(r"still building the native ops: \d+ s", line) for line in going)
    assert re.fullmatch(r"built the native ops in \d+\.\d s \(cached in .*cache\)", lines[-1])


def test_a_compiler_that_fails_is_one_reason_and_nothing_is_left(tmp_path, monkeypatch, said):
    monkeypatch.setenv("CXX", compiler(tmp_path, 'echo "x.cc:1:1: error: no such thing" >&2; exit 1\n'))
    library = str(tmp_path / "cache" / "ops-test.so")
    assert native._build_announced(library) == "fake-c++ failed: x.cc:1:1: error: no such thing"
    assert not os.path.exists(library) and sorted(os.listdir(tmp_path / "cache")) == ["ops-test.so.lock"]
    assert len(said()) == 1
