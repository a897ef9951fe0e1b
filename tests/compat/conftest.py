"""The compat tier's fixtures: each peer's Python (peers.py), or its tests skipped with the
reason where it could not be installed."""

import pytest
from peers import peer_download, peer_python


@pytest.fixture(scope="session")
def tft_python():
    return peer_python("tft")


@pytest.fixture(scope="session")
def tfx_wheel(tft_python):
    """TFX's wheel, downloaded beside tf.Transform's venv: its example pipelines (scripts/example_pipelines.py)."""
    return peer_download("tft")


@pytest.fixture(scope="session")
def tfdv_python():
    return peer_python("tfdv")


def pytest_collection_modifyitems(items):
    """Runs the tier's tests last, each module's together: .ci/run installs the peers beside the
    suite, and by the end of it they are installed (a test that comes first waits for its peer)."""
    items.sort(key=lambda item: 0 if item.get_closest_marker("soak") else 2 if item.get_closest_marker("compat") else 1)
