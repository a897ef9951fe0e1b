"""tf2_mapreduce against the usual tools, on one generated corpus, in one run: `python -m benchmarks`.
One module per concern (corpora, peers, timing, report, targets) and one per part of the corpus."""

import os

__all__ = ["REPO"]

# The checkout: the benchmark runs its scripts/ and its tests' storage server from there.
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
