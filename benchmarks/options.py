"""The benchmark's flags: the corpus's sizes, the parts and clusters timed, the repeats, and
where the rows go; `python -m benchmarks --help` lists them."""

import os
import tempfile

from absl import flags

from benchmarks.scale_examples import WIDE_TERM_BYTES, WIDE_TERMS_DISTINCT, WIDE_TERMS_EXAMPLES

__all__ = ["FLAGS"]

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "dir", os.path.join(tempfile.gettempdir(), "tf2_mapreduce-bench"), "Where the corpus is (made once)."
)
flags.DEFINE_integer("small_files", 2000, "Number of small files.", lower_bound=0)
flags.DEFINE_integer("small_kb", 252, "Size of each small file, in KB.", lower_bound=1)
flags.DEFINE_integer("tiny_files", 100_000, "Number of tiny files (about 100 bytes each).", lower_bound=0)
flags.DEFINE_integer("huge_mb", 1024, "Size of the one huge file, in MB; 0 for none.", lower_bound=0)
flags.DEFINE_integer("giant_mb", 4096, "Size of the one giant file, in MB; 0 for none.", lower_bound=0)
flags.DEFINE_integer(
    "examples_mb", 1024, "Size of the tf.Example dataset (GZIP'd TFRecord shards), in MB; 0 for none.", lower_bound=0
)
flags.DEFINE_integer(
    "record_mb", 4096, "Size of the one uncompressed TFRecord file of examples, in MB; 0 for none.", lower_bound=0
)
flags.DEFINE_integer(
    "layout_files",
    1_000_000,
    "Files in each listing layout (one directory; a 3-level tree); 0 for none.",
    lower_bound=0,
)
flags.DEFINE_list(
    "parts",
    [
        "small",
        "tiny",
        "huge",
        "giant",
        "examples",
        "record",
        "layouts",
        "storage",
        "transform",
        "transform_small",
        "transform_wide",
        "transform_keras",
    ],
    "Parts of the corpus to time (all are made).",
)
flags.DEFINE_string(
    "tft_python",
    "/tmp/tft/bin/python",
    "The transform part's tf.Transform side: a Python with tensorflow-transform 1.21 (a venv of its own).",
)
flags.DEFINE_integer(
    "scale_examples",
    20_000_000,
    "The transform_scale part's examples (N: it runs N and 2N, each of half as many distinct terms); "
    "a part timed only when --parts names it.",
    lower_bound=2,
)
flags.DEFINE_integer(
    "scale_tft_examples",
    0,
    "tf.Transform's size in the transform_scale part (the largest it finishes: docs/performance.md); 0: not run.",
    lower_bound=0,
)
flags.DEFINE_boolean(
    "scale_wide_terms",
    True,
    "The transform_scale part also runs %d examples of %d distinct terms of %d bytes: a whole vocabulary "
    "over 2 GiB, more than a GraphDef holds." % (WIDE_TERMS_EXAMPLES, WIDE_TERMS_DISTINCT, WIDE_TERM_BYTES),
)
flags.DEFINE_integer(
    "transform_shards",
    16,
    "Shards of the tf.Example part that the transform and transform_keras parts read (16: all, 1 GB).",
    lower_bound=1,
)
flags.DEFINE_list("clusters", ["1x2", "1x1", "2x2"], "Local clusters to time, as PSxWORKERS.")
flags.DEFINE_bool("wordfreq", True, "Also time word frequencies against collections.Counter.")
flags.DEFINE_integer("repeats", 3, "Runs of each contender, taken in turns; the report gives medians.", lower_bound=1)
flags.DEFINE_string("json", None, "Also write the rows as JSON to this path.")
flags.DEFINE_string("peer", None, "Internal: run one peer in this process and print its result as JSON.")
