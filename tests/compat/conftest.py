"""The compat tier's fixtures: each peer's Python (peers.py), or its tests skipped with the
reason where it could not be installed."""

import pytest
from peers import peer_python


@pytest.fixture(scope="session")
def tft_python():
    return peer_python("tft")


@pytest.fixture(scope="session")
def tfdv_python():
    return peer_python("tfdv")


def pytest_collection_modifyitems(items):
    """Runs the tier's tests early, after the soak (tests/conftest.py puts it first), each module's
    together. xdist's worksteal hands each worker a contiguous share and steals from the end of a
    queue: tests at the front of it stay on one worker, which makes each module's peer run (a
    minute) while the other worker runs other tests, rather than waiting for it (peers.made_once)."""
    items.sort(key=lambda item: 0 if item.get_closest_marker("soak") else 1 if item.get_closest_marker("compat") else 2)
