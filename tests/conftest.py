"""The suite's fixtures (a hang guard, real processes reaped on exit, the in-process
cluster) and its tiers: every test under tests/cluster is marked `cluster`. What the
tests share besides fixtures is in helpers/ (importable as `helpers.<module>`)."""

import compileall
import faulthandler
import os

import pytest

pytest.register_assert_rewrite("helpers")

from helpers.processes import INPROCESS_PS, INPROCESS_WORKERS, Processes  # noqa: E402

# A test that hangs (TF's join() can block forever) is killed with a traceback
# after this many seconds instead of eating CI's time.
TEST_TIMEOUT = 240
CLUSTER_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cluster")


PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tf2_mapreduce")


def pytest_configure(config):
    """Compiles the package to bytecode once, in the controller (not in each xdist worker).
    Where PYTHONDONTWRITEBYTECODE is set (it is on the machines this was measured on),
    Python writes none at import, and each of the ~300 processes the suite starts compiled
    every module again (0.09 s of CPU each, measured); a user's first run writes it."""
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(PACKAGE, quiet=1)


@pytest.hookimpl(tryfirst=True)  # before -m selects by the markers
def pytest_collection_modifyitems(items):
    """Marks `cluster` every test under tests/cluster, and only those: the directory is
    the tier (deselected by -m "not cluster" as the marker is). Runs the soak first: it is
    one test of minutes, and begun last it kept one core busy after the other had run out
    of tests to take (xdist hands each worker its share in collection order)."""
    for item in items:
        if os.path.commonpath([str(item.path), CLUSTER_TESTS]) == CLUSTER_TESTS:
            item.add_marker(pytest.mark.cluster)
    items.sort(key=lambda item: item.get_closest_marker("soak") is None)


@pytest.fixture(autouse=True)
def hang_guard():
    faulthandler.dump_traceback_later(TEST_TIMEOUT, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def inprocess():
    """A connected `Cluster` of 2 ps and 2 worker servers inside this test process, its
    chief (the public API's `Cluster.local()`). TF cannot stop servers, and lets a
    process connect to one cluster in its life: one serves every test of the session."""
    import tf2_mapreduce as mr

    with mr.Cluster.local(INPROCESS_PS, INPROCESS_WORKERS) as cluster:
        yield cluster


@pytest.fixture(scope="session", autouse=True)
def connected_first(request):
    """Connects the in-process cluster before any test runs, where the tests selected
    hold one that uses it (each xdist worker collects them all): TensorFlow tells its
    remote tasks to remove every function freed after it connected, and one traced
    before was never sent to them, so each would print "Failed to remove function
    remotely" at exit."""
    if any("inprocess" in item.fixturenames for item in request.session.items):
        request.getfixturevalue("inprocess")


@pytest.fixture(scope="module")
def vocab_shards(tmp_path_factory):
    """24 TFRecord shards of tf.Example records (GZIP, uncompressed and ZLIB) with the
    features `helpers.corpora.VOCAB_FEATURES`: (their directory, their paths, their
    `helpers.oracles.oracle_vocab`)."""
    from helpers.corpora import VOCAB_FEATURES, write_examples
    from helpers.oracles import oracle_vocab

    directory = str(tmp_path_factory.mktemp("examples"))
    paths = write_examples(directory, 24, 400, seed=5, compressions=("GZIP", "", "ZLIB"))
    return directory, paths, oracle_vocab(paths, VOCAB_FEATURES)


@pytest.fixture
def processes():
    procs = Processes()
    try:
        yield procs
    finally:
        procs.reap()


@pytest.fixture
def no_pass(monkeypatch):
    """Any pass of a transform over its data fails the test: what is checked must fail before it."""
    from tf2_mapreduce.transform import run as transform_run

    run = transform_run.run

    def without_passes(transform, run_pass, *args, **kwargs):
        def refused(job, options):
            raise AssertionError("a pass over the data ran: %s" % job.name)

        return run(transform, refused, *args, **kwargs)

    monkeypatch.setattr(transform_run, "run", without_passes)
