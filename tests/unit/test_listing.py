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
import json, os, sys, threading
from tf2_mapreduce.inputs import background as listing
from tf2_mapreduce.errors import InputError
specs, on_error, feed, hold, stat_children = json.loads(sys.argv[1])
if feed is not None:
    # A writer of the @list FIFO, there for whichever process opens it to read first.
    def write_fifo():
        with open(feed[0], "w") as f:
            f.write(feed[1])
    threading.Thread(target=write_fifo).start()
if hold:
    # The child stops at its first stat, after it read its @lists, and says so: killed
    # there, it cannot have answered. Its read of `held` ends only with it.
    from tf2_mapreduce.inputs import local_stats
    parent, (reached, reached_w), (held, _) = os.getpid(), os.pipe(), os.pipe()
    stat_files = local_stats.stat_files
    def held_stat_files(paths):
        if os.getpid() != parent:
            os.write(reached_w, b"x")
            os.read(held, 1)
        return stat_files(paths)
    local_stats.stat_files = held_stat_files
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
answer = {}
if hold and forked:
    os.close(reached_w)
    answer["held"] = os.read(reached, 1) == b"x"  # b"" had the child ended before its stat
    os.kill(background._child.pid, 9)
try:
    found = background.result()
    answer.update({"files": [[f.path, f.size, f.mtime_ns] for f in found.files], "hidden": found.hidden,
                   "duplicates": found.duplicates, "skipped": [list(s) for s in found.skipped]})
except InputError as e:
    answer["error"] = [e.path, e.reason, str(e)]
answer["forked"] = forked
answer["tensorflow"] = "tensorflow" in sys.modules
print(json.dumps(answer))
"""


def list_in_a_fresh_process(specs, on_error, feed=None, hold=False, stat_children=None, stdin=None):
    """`feed`: [a FIFO, what a thread writes into it]; `hold`: the child is killed at its
    first stat; `stdin`: the text of the script's standard input (a pipe)."""
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps([specs, on_error, feed, hold, stat_children])],
        input=stdin,
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


def test_a_child_killed_before_it_answers_is_listed_again_here(tree):
    root, listed = tree
    specs = [str(root), "@%s" % listed]
    answer = list_in_a_fresh_process(specs, "skip", hold=True)
    assert answer.pop("forked") is True and answer.pop("held") is True
    answer.pop("tensorflow")
    assert answer == as_json(expand(specs, on_error="skip"))
    assert len(answer["files"]) == 65 and len(answer["skipped"]) == 2


@pytest.mark.parametrize("stream", ["fifo", "stdin"])
def test_an_at_list_read_once_is_listed_whole_after_its_child_died(tree, tmp_path, stream):
    """A stream @list (a FIFO, a pipe as /dev/stdin) gives its lines once: the child that
    lists it dies after reading its @list, and the listing done again here has them all,
    neither short nor waiting for a writer that is gone."""
    root, listed = tree
    text = listed.read_text() + "%s\n" % (root / "b")
    if stream == "fifo":
        at_list = tmp_path / "list.fifo"
        os.mkfifo(at_list)
        answer = list_in_a_fresh_process(["@%s" % at_list], "skip", feed=[str(at_list), text], hold=True)
    else:
        at_list = "/dev/stdin"
        answer = list_in_a_fresh_process(["@%s" % at_list], "skip", hold=True, stdin=text)
    assert answer.pop("forked") is True and answer.pop("held") is True
    answer.pop("tensorflow")
    regular = tmp_path / "regular.txt"
    regular.write_text(text)  # the same lines, from a file
    expected = as_json(expand(["@%s" % regular], on_error="skip"))
    # A line is named by its list: the same line of another list.
    expected["skipped"] = [[path.replace(str(regular), str(at_list)), why] for path, why in expected["skipped"]]
    assert answer == expected
    assert len(answer["files"]) == 26 and len(answer["skipped"]) == 1


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


OUTLIVED = """
import os
from tf2_mapreduce.cluster import orphans
from tf2_mapreduce.inputs import forked
def refused(parent):
    raise OSError("planted: no PR_SET_PDEATHSIG")
orphans.die_with_parent = refused  # the grandchild outlives the child that forked it
(up, up_w), (held, held_w) = os.pipe(), os.pipe()
def grandchild():
    os.write(up_w, b"%d" % os.getpid())
    os.read(held, 1)  # EOF when this script ends: only it holds `held_w`
    return b""
def child():
    os.close(held_w)
    forked.Forked.start(grandchild)
    os.read(held, 1)
    return b"never"
top = forked.Forked.start(child)
os.close(up_w)
grandchild_pid = int(os.read(up, 20))
os.kill(top.pid, 9)
answer = top.answer()
with open("/proc/%d/stat" % grandchild_pid) as f:
    state = f.read().rsplit(")", 1)[1].split()[0]
print(answer, state not in "ZXx")  # alive: running or asleep, by load, never reaped nor a zombie
"""


def test_a_dead_childs_answer_does_not_wait_for_its_own_forked_process():
    """A process forked by a child that outlives it (it was not killed with it) leaves
    `answer()` to return at the child's death: it does not hold the child's pipe open."""
    run = subprocess.run([sys.executable, "-c", OUTLIVED], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert run.stdout.split() == ["None", "True"], run.stderr  # answered while the grandchild still lives
