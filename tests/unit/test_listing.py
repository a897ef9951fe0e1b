"""Listing in a child process forked before TensorFlow is imported (`listing`): the
same `Inputs` as `expand` lists in this process, the same errors, without
TensorFlow; and the same answer when the child cannot help."""

import json
import os
import subprocess
import sys

import pytest
from helpers.corpora import touch, write_corpus
from helpers.processes import REPO

from tf2_mapreduce.errors import InputError
from tf2_mapreduce.inputs import background as listing
from tf2_mapreduce.inputs.listing import expand

# Lists in a fresh interpreter, where TensorFlow is not imported, so the child is forked.
SCRIPT = """
import json, os, sys
from tf2_mapreduce.inputs import background as listing
from tf2_mapreduce.errors import InputError
import threading
specs, on_error, fifo_lines, stat_children = json.loads(sys.argv[1])
if stat_children:
    # Stats spread over forked processes however few the files; each forked process logs
    # its share, and with "die" fails without an answer.
    from tf2_mapreduce.inputs import local_stats
    log, mode = stat_children
    local_stats._FORK_AT = 1
    os.sched_getaffinity = lambda pid: {0, 1}  # two processes on a machine of one core too
    stat_bytes = local_stats._stat_bytes
    def logged(paths):
        with open(log, "a") as f:
            f.write("%d\\n" % len(paths))
        if mode == "die":
            raise SystemExit(1)
        return stat_bytes(paths)
    local_stats._stat_bytes = logged
background = listing.BackgroundListing(specs, on_error)
forked = background._child is not None
if fifo_lines is not None:
    # The child is held in open() on the @list FIFO until a writer comes: killed there,
    # it cannot have answered. The writer then feeds the listing that follows here.
    os.kill(background._child.pid, 9)
    def feed():
        with open(specs[0][1:], "w") as f:
            f.write(fifo_lines)
    threading.Thread(target=feed).start()
try:
    found = background.result()
    answer = {"files": [[f.path, f.size, f.mtime_ns] for f in found.files], "hidden": found.hidden,
              "duplicates": found.duplicates, "skipped": [list(s) for s in found.skipped]}
except InputError as e:
    answer = {"error": [e.path, e.reason, str(e)]}
answer["forked"] = forked
answer["tensorflow"] = "tensorflow" in sys.modules
print(json.dumps(answer))
"""


def list_in_a_fresh_process(specs, on_error, fifo_lines=None, stat_children=None):
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps([specs, on_error, fifo_lines, stat_children])],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def as_json(found):
    return {
        "files": [[f.path, f.size, f.mtime_ns] for f in found.files],
        "hidden": found.hidden,
        "duplicates": found.duplicates,
        "skipped": [list(s) for s in found.skipped],
    }


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "corpus"
    write_corpus(str(root / "a"), 40, seed=1)
    write_corpus(str(root / "b" / "c"), 25, seed=2)
    (root / ".hidden").write_bytes(b"not listed")
    (root / "b" / "_SUCCESS").write_bytes(b"")
    os.symlink(root / "a" / "f0003.txt", root / "link.txt")
    os.symlink(tmp_path / "nowhere", root / "broken.txt")
    listed = tmp_path / "list.txt"
    listed.write_text("%s\n\n%s\n" % (root / "a" / "f0001.txt", tmp_path / "missing.txt"))
    return root, listed


def test_a_forked_listing_finds_what_expand_finds_without_tensorflow(tree, tmp_path):
    root, listed = tree
    specs = [str(root), "@%s" % listed, str(root / "b" / "c" / "*.txt"), str(tmp_path / "gone")]
    answer = list_in_a_fresh_process(specs, "skip")
    assert answer.pop("forked") is True
    assert answer.pop("tensorflow") is False
    assert answer == as_json(expand(specs, on_error="skip"))
    assert len(answer["files"]) == 65 and len(answer["skipped"]) == 3 and answer["duplicates"]


@pytest.mark.parametrize("mode", ["answer", "die"])
def test_files_statted_in_forked_processes_list_as_in_one(tree, tmp_path, mode):
    """Many files are statted in parts by forked processes (here forked for any number);
    a part whose process dies without an answer is statted by the listing itself."""
    root, listed = tree
    os.link(root / "a" / os.listdir(root / "a")[0], root / "a" / "hard.txt")
    os.mkfifo(root / "b" / "pipe.txt")
    specs = [str(root), "@%s" % listed, str(root / "b" / "c" / "*.txt")]
    log = tmp_path / "forks.log"
    answer = list_in_a_fresh_process(specs, "skip", stat_children=[str(log), mode])
    assert answer.pop("forked") is True and answer.pop("tensorflow") is False
    assert answer == as_json(expand(specs, on_error="skip"))
    assert len(answer["files"]) == 66 and len(answer["skipped"]) == 3 and answer["duplicates"]
    parts = [int(n) for n in log.read_text().split()]  # files handed to a forked process, per fork
    assert parts and 0 < sum(parts) < 66 + 3


def test_a_forked_listing_raises_the_error_expand_raises(tree, tmp_path):
    root, listed = tree
    specs = [str(root / "a"), "@%s" % listed]
    answer = list_in_a_fresh_process(specs, "fail")
    with pytest.raises(InputError) as expected:
        expand(specs, on_error="fail")
    assert answer["error"] == [expected.value.path, expected.value.reason, str(expected.value)]
    assert answer["forked"] is True


def test_a_child_killed_before_it_answers_is_listed_again_here(tree, tmp_path):
    root, listed = tree
    fifo = tmp_path / "list.fifo"
    os.mkfifo(fifo)
    answer = list_in_a_fresh_process(["@%s" % fifo], "skip", fifo_lines=listed.read_text())
    assert answer.pop("forked") is True
    answer.pop("tensorflow")
    fifo.unlink()
    listed.rename(fifo)  # the same list, now a file, listed here
    assert answer == as_json(expand(["@%s" % fifo], on_error="skip"))
    assert len(answer["files"]) == 1 and len(answer["skipped"]) == 1


def test_with_tensorflow_imported_it_lists_here(tree):
    import tensorflow  # noqa: F401 - its threads would not survive a fork

    root, _ = tree
    here = listing.BackgroundListing([str(root)], "skip")
    assert here._child is None
    assert as_json(here.result()) == as_json(expand([str(root)], on_error="skip"))


STAT_FAILS = """
import os, sys
from tf2_mapreduce.inputs import local_stats
local_stats._FORK_AT = 1
os.sched_getaffinity = lambda pid: {0, 1, 2, 3}  # four parts: three forked processes
parent, chunk = os.getpid(), local_stats._stat_chunk
def failing(paths):
    if os.getpid() == parent:
        raise MemoryError("planted")
    return chunk(paths)
local_stats._stat_chunk = failing
fds = sorted(os.listdir("/proc/self/fd"))
try:
    local_stats.stat_files(sys.argv[1:])
except MemoryError:
    pass
try:
    left = os.waitpid(-1, os.WNOHANG)
except ChildProcessError:
    left = "none"
print(left, sorted(os.listdir("/proc/self/fd")) == fds)
"""


def test_an_error_while_statting_leaves_no_process_and_no_pipe(tmp_path):
    """The processes forked to stat files are killed and reaped, their pipes closed,
    when the statting process fails before it read them all."""
    paths = [touch(str(tmp_path / ("f%d.txt" % n))) for n in range(400)]
    run = subprocess.run(
        [sys.executable, "-c", STAT_FAILS, *paths], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert run.stdout.split() == ["none", "True"], run.stderr
