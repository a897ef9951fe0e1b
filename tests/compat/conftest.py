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
