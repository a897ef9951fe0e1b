"""Our Transform against tf.Transform's: one preprocessing_fn over the same examples, both outputs
loaded with `tft.TFTransformOutput` and compared.

    python scripts/compare_tft.py --examples 3000 [--tft_python .venv-peers/tft/bin/python] [--work DIR]

Run from this repo's venv; --tft_python is a Python of a venv of its own with tensorflow-transform
1.21 (TensorFlow 2.21, Beam 2.77), by default the one `python3 scripts/install_peers.py` makes.
Writes raw tf.Example shards (GZIP TFRecord: x float, n int64, s a string of skewed counts with
ties, tags 0-3 strings) and their tensorflow-metadata schema under --work, then, each side in a
process of its own, one after the other, timed:
  tft   tft_beam.AnalyzeAndTransformDataset + WriteTransformFn on Beam's DirectRunner, the
        transformed record batches encoded as tf.Examples and written with WriteToTFRecord;
  ours  mr.Transform on a local cluster (1 ps, 2 workers, in its process).
Then, with --tft_python, loads both outputs with tft.TFTransformOutput and compares their
transformed_feature_spec (and our raw_feature_spec with the raw schema's), vocabularies (vocabulary_by_name), transform_raw_features over every
raw example (and a few probes of values the data never had), our written examples against our
transform_fn (bit for bit, in input order), and the transformed examples written (as
multisets: Beam writes in no fixed order). Prints markdown tables: the checks, and each side's
seconds (its process; its job alone, imports left out). Exit status 1 unless specs,
vocabularies and integer outputs are equal, floats within 2 ulps and our data/ our
transform_fn's; bucketize may differ (tf.Transform's quantiles are approximate, ours exact):
counted, never failed. The test tier tests/compat runs the same comparison in CI.
"""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

from absl import app, flags

FLAGS = flags.FLAGS
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def define_flags():
    """The script's flags: defined when it runs, not when tests/compat imports it."""
    flags.DEFINE_integer("examples", 3000, "Raw examples to generate.", lower_bound=1)
    flags.DEFINE_string(
        "tft_python",
        os.path.join(REPO, ".venv-peers", "tft", "bin", "python"),
        "A Python with tensorflow-transform installed.",
    )
    flags.DEFINE_string(
        "work", None, "Directory for the examples, both outputs and the logs (default: a new temp dir)."
    )
    flags.DEFINE_enum(
        "side", None, ["tft", "ours", "compare"], "Internal: the step this process runs (the script runs itself)."
    )


SEED = 0
SHARDS = 3
SIDES = ("ours", "tft")
SCHEMA = """\
feature { name: "x" type: FLOAT presence { min_fraction: 1.0 } shape {} }
feature { name: "n" type: INT presence { min_fraction: 1.0 } shape {} }
feature { name: "s" type: BYTES presence { min_fraction: 1.0 } shape {} }
feature { name: "tags" type: BYTES }
feature { name: "r" type: FLOAT }
tensor_representation_group {
  key: ""
  value { tensor_representation { key: "r" value { ragged_tensor { feature_path { step: "r" } } } } }
}
"""
# Forty values of s, in hundredths: the fifth to seventh tie, across top_k=5's cut.
S_WEIGHTS = [12, 9, 9, 7, 5, 5, 5, 4, 3, 3] + [2] * 8 + [1] * 22
TAGS = [b"tag%02d" % i for i in range(15)]
# For transform_raw_features only: values no vocabulary holds (an empty string is never in one),
# and x and n outside the range analyzed.
PROBES = [
    (-1000.0, -100, b"never-seen", [b"unseen", b"", b"tag00"]),
    (1000.0, 10**6, b"", []),
    (10.0, 0, b"s00", [b"unseen-too"] * 3),
]
# Outputs whose values may differ: their boundaries are tf.Transform's approximate quantiles.
BUCKETS = ("x_bucket",)


def preprocessing_fn(tft):
    """The preprocessing_fn of both sides, written against `tft`: tensorflow_transform or
    tf2_mapreduce.transform."""
    import tensorflow as tf

    def fn(inputs):
        x, n, s, tags = inputs["x"], inputs["n"], inputs["s"], inputs["tags"]
        # Not applied: made for the trainer, which reads it by its name (TFX's guide does this).
        tft.vocabulary(tags, vocab_filename="tags_for_the_trainer")
        outputs = {
            "x_z": tft.scale_to_z_score(x),
            "x_0_1": tft.scale_to_0_1(x),
            "n_scaled": tft.scale_by_min_max(n, output_min=-1.0, output_max=1.0),
            "x_bucket": tft.bucketize(x, 5),
            "s_id": tft.compute_and_apply_vocabulary(s),
            "tags_id": tft.compute_and_apply_vocabulary(tags, num_oov_buckets=3),
            "s_top5_id": tft.compute_and_apply_vocabulary(s, top_k=5, vocab_filename="s_top5"),
            "n_mean": tf.zeros_like(n, tf.float32) + tft.mean(n),
            # Calls of no analyzer, and the quantiles themselves (exact here; tft's sketch is at this size).
            "s_hashed": tft.hash_strings(s, 7),
            "tags_hashed": tft.sparse_tensor_to_dense_with_shape(
                tft.hash_strings(tags, 11, key=[123, 456]), [None, 4], default_value=-1
            ),
            "x_quantiles": tf.zeros_like(x)[:, None] + tft.quantiles(x, 4, 0.01),
            # Text (the sentiment example's calls): tags as tokens, and s's characters.
            "tags_ngrams": tft.ngrams(tags, (1, 2), " "),
            "tags_bag": tft.bag_of_words(tags, (1, 3), "|"),
            "tags_count": tft.word_count(tags),
            "s_char_bag": tft.bag_of_words(tf.compat.v1.string_split(s, ""), (1, 2), ""),
        }
        # Each column of [x, n] by its own statistics (elementwise=True).
        xn = tf.stack([x, tf.cast(n, tf.float32)], axis=1)
        outputs["xn_z"] = tft.scale_to_z_score(xn, elementwise=True)
        outputs["xn_0_1"] = tft.scale_to_0_1(xn, elementwise=True)
        # A lookup table of the user's own on a vocabulary's file.
        s_lines = tf.lookup.TextFileInitializer(
            tft.vocabulary(s, vocab_filename="s_for_a_table"),
            tf.string,
            tf.lookup.TextFileIndex.WHOLE_LINE,
            tf.int64,
            tf.lookup.TextFileIndex.LINE_NUMBER,
        )
        outputs["s_own_table_id"] = tf.lookup.StaticVocabularyTable(s_lines, 2).lookup(s)
        # Analyzers over analyzers' results (tf.Transform's phases): tf-idf over a
        # vocabulary's ids (its sentiment example), a mean of ids, a scaling of a scaling.
        tag_ids = tft.compute_and_apply_vocabulary(tags, top_k=10)
        outputs["tags_tfidf_id"], outputs["tags_tfidf"] = tft.tfidf(tag_ids, 11)
        outputs["s_id_mean"] = tf.zeros_like(x) + tft.mean(outputs["s_id"])
        outputs["x_z_0_1"] = tft.scale_to_0_1(outputs["x_z"])
        # A RaggedFeature and what tf.Transform's census_example_v2 makes of one: a scaling, as
        # a ragged output and as one value an example; a sparse one-hot of a vocabulary's
        # width, annotated (a SparseFeature), its values its columns + 1 (so that a value
        # read in the wrong column shows).
        outputs["r_ragged"] = tft.scale_to_0_1(inputs["r"])
        outputs["r_0_1"] = outputs["r_ragged"].to_tensor(default_value=0.0, shape=[None, 1])
        width = tft.experimental.get_vocabulary_size_by_name("s_top5")
        columns = tf.range(1, width + 1)[None, :]
        s_sparse = tf.sparse.from_dense(
            tf.one_hot(outputs["s_top5_id"], tf.cast(width, tf.int32), dtype=tf.int64) * columns
        )
        tft.experimental.annotate_sparse_output_shape(s_sparse, width)
        outputs["s_sparse_one_hot"] = s_sparse
        # A one-hot as deep as a vocabulary (TFX's taxi and census modules).
        depth = tf.cast(tft.experimental.get_vocabulary_size_by_name("s_top5"), tf.int32)
        outputs["s_top5_one_hot"] = tf.one_hot(outputs["s_top5_id"], depth, dtype=tf.int64)
        return outputs

    return fn


def raw_pattern(work, split="raw"):
    return os.path.join(work, split, "part-*.tfrecord.gz")


def eval_pattern(work):
    """Another split's examples: written by `write_raw(work, count, "eval")`, transformed by
    each side's transform of the raw split."""
    return raw_pattern(work, "eval")


def schema_path(work):
    return os.path.join(work, "raw_schema.pbtxt")


def read_schema(work):
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    with open(schema_path(work)) as f:
        return text_format.Parse(f.read(), schema_pb2.Schema())


def serialized_example(x, n, s, tags, r=None):
    import tensorflow as tf

    feature = {
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[x])),
        "n": tf.train.Feature(int64_list=tf.train.Int64List(value=[n])),
        "s": tf.train.Feature(bytes_list=tf.train.BytesList(value=[s])),
        "tags": tf.train.Feature(bytes_list=tf.train.BytesList(value=tags)),
    }
    if r is not None:  # r (a RaggedFeature) may be missing, as census's optional education-num
        feature["r"] = tf.train.Feature(float_list=tf.train.FloatList(value=r))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def s_column(count, rng):
    """`count` values of s, value i S_WEIGHTS[i] hundredths of them (rounded down), shuffled. The
    rounding's remainder goes to the last value alone, so that equal weights stay equal counts."""
    counts = [count * w // sum(S_WEIGHTS) for w in S_WEIGHTS]
    counts[-1] += count - sum(counts)
    column = [b"s%02d" % i for i, c in enumerate(counts) for _ in range(c)]
    rng.shuffle(column)
    return column


def write_raw(work, count, split="raw"):
    """Writes `count` examples in SHARDS files of `split`, and their schema. Same count and
    split, same examples; another split, others of the same kind."""
    import tensorflow as tf

    rng = random.Random(SEED if split == "raw" else split)
    os.makedirs(os.path.join(work, split), exist_ok=True)
    with open(schema_path(work), "w") as f:
        f.write(SCHEMA)
    tag_weights = [1 / (i + 1) for i in range(len(TAGS))]
    column = s_column(count, rng)
    r_rng = random.Random(repr((SEED, split, "r")))  # a stream of its own: the other columns as they were
    writers = [
        tf.io.TFRecordWriter(os.path.join(work, split, "part-%05d.tfrecord.gz" % i), options="GZIP")
        for i in range(SHARDS)
    ]
    for i, s in enumerate(column):
        # Two decimals: repeated values of x, so that quantile boundaries fall on ties.
        x = round(rng.gauss(10, 3), 2)
        n = int(rng.expovariate(1 / 8)) - 2
        tags = rng.choices(TAGS, weights=tag_weights, k=rng.choice((0, 1, 1, 2, 3)))
        r = [round(r_rng.uniform(0, 16), 1) for _ in range(r_rng.choice((0, 1, 1, 1, 2)))]
        writers[i * SHARDS // count].write(serialized_example(x, n, s, tags, r if r or r_rng.random() < 0.5 else None))
    for writer in writers:
        writer.close()


def run_tft(work, out):
    # Beam 2.77's DirectRunner tries Prism first (a binary it downloads), then the FnApiRunner:
    # its log (tft.log) says which ran. The pipeline is the bench's, from the checkout: appended,
    # so that nothing of the checkout shadows the tf.Transform venv's packages.
    if REPO not in sys.path:
        sys.path.append(REPO)
    from benchmarks import tf_transform

    tf_transform.run_tft(raw_pattern(work), schema_path(work), out, preprocessing_fn)


def run_ours(work, out):
    import tf2_mapreduce as mr
    import tf2_mapreduce.transform as tft

    with mr.Cluster.local(1, 2) as cluster:
        transform = mr.Transform(preprocessing_fn(tft), schema=schema_path(work), num_shards=2)
        cluster.run(transform, [raw_pattern(work)], output_dir=out)


def run_side(work, side):
    """Runs one side into `work`/`side`, and writes the job's seconds (imports left out) in `work`/`side`.json."""
    out = os.path.join(work, side)
    start = time.monotonic()
    (run_tft if side == "tft" else run_ours)(work, out)
    with open(os.path.join(work, side + ".json"), "w") as f:
        json.dump({"seconds": time.monotonic() - start}, f)


# The comparison, in the tf.Transform venv.


def per_example(tensor):
    """A batch's values as a list of 1-D arrays, one an example."""
    import tensorflow as tf

    if isinstance(tensor, tf.SparseTensor):  # each row's values, in the order the tensor holds them
        import numpy as np

        rows = tensor.indices[:, 0].numpy()
        order = np.argsort(rows, kind="stable")
        splits = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=int(tensor.dense_shape[0])))])
        values = tensor.values.numpy()[order]
        return [values[a:b] for a, b in zip(splits[:-1], splits[1:])]
    if isinstance(tensor, tf.RaggedTensor):
        values, splits = tensor.flat_values.numpy(), tensor.row_splits.numpy()
        return [values[a:b] for a, b in zip(splits[:-1], splits[1:])]
    return list(tensor.numpy().reshape(tensor.shape[0], -1))


def extend(table, batch):
    for name, tensor in batch.items():
        table.setdefault(name, []).extend(per_example(tensor))


def raw_records(work, probes=True, split="raw"):
    """The raw examples' batches, in the order of their files (our input order), then the probes."""
    import tensorflow as tf

    files = sorted(tf.io.gfile.glob(raw_pattern(work, split)))
    yield from tf.data.TFRecordDataset(files, compression_type="GZIP").batch(4096)
    if probes:
        yield tf.constant([serialized_example(*probe) for probe in PROBES])


def raw_feature_spec(work):
    from tensorflow_transform.tf_metadata import schema_utils

    return schema_utils.schema_as_feature_spec(read_schema(work)).feature_spec


def transformed(output, work, probes=True, split="raw"):
    """{output name: per example} of `output`'s transform_raw_features over `raw_records`."""
    import tensorflow as tf

    raw_spec = raw_feature_spec(work)
    table = {}
    for records in raw_records(work, probes, split):
        extend(table, output.transform_raw_features(tf.io.parse_example(records, raw_spec)))
    return table


def written(output_dir, spec):
    """{feature: per example} of the transformed examples written in `output_dir`/data, file by file."""
    import tensorflow as tf

    files = sorted(tf.io.gfile.glob(os.path.join(output_dir, "data", "part-*")))
    table = {name: [] for name in spec}
    for records in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(4096):
        extend(table, tf.io.parse_example(records, spec))
    return table


def kinds_of(spec, buckets=BUCKETS):
    import tensorflow as tf

    return {
        name: "bucket"
        if name in buckets
        else "int"
        if feature.dtype == tf.int64
        else "bytes"
        if feature.dtype == tf.string
        else "float"
        for name, feature in spec.items()
    }


def canonical(table, kinds):
    """`table`'s examples in an order that does not depend on the order written: by their integer
    features, then their floats. Buckets are left out of the key, as they may differ. Floats an ulp
    apart still order both sides' examples alike: each is a monotone function of one raw value."""
    keys = sorted(table, key=lambda name: (kinds[name] != "int", name))
    keys = [name for name in keys if kinds[name] != "bucket"]
    count = len(table[keys[0]])
    order = sorted(range(count), key=lambda i: tuple(tuple(table[name][i].tolist()) for name in keys))
    return {name: [values[i] for i in order] for name, values in table.items()}


def ulps(a, b):
    """How many float32 values apart `a` and `b` are, value by value."""
    import numpy as np

    def ordered(v):
        bits = v.astype(np.float32).view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(2**31) - bits, bits)  # negatives by magnitude; -0.0 is 0.0

    return np.abs(ordered(a) - ordered(b))


def compare_feature(kind, ours, theirs):
    """One feature over aligned examples (lists of 1-D arrays): {"examples", "differing" (examples
    with a value that is not equal), "max_ulps" (floats), "result", "verdict"}."""
    import numpy as np

    if len(ours) != len(theirs):
        return {"examples": len(theirs), "result": "ours %d examples, tf.Transform %d" % (len(ours), len(theirs))}
    count = len(ours)
    shaped = sum(a.shape != b.shape for a, b in zip(ours, theirs))
    if shaped:
        return {"examples": count, "result": "%d/%d examples with another number of values" % (shaped, count)}
    a, b = np.concatenate(ours), np.concatenate(theirs)
    same = (a == b) | (np.isnan(a) & np.isnan(b)) if kind == "float" else a == b
    rows = np.repeat(np.arange(count), [len(v) for v in ours])
    differing = len(np.unique(rows[~same]))
    figures = {"examples": count, "differing": differing}
    if kind == "bucket":
        size = int(max(a.max(initial=0), b.max(initial=0))) + 1
        ours_counts, theirs_counts = (np.bincount(v, minlength=size).tolist() for v in (a, b))
        return dict(
            figures,
            result="%d/%d examples in another bucket; per bucket: ours %s, tf.Transform %s"
            % (differing, count, ours_counts, theirs_counts),
            verdict="approx.",
        )
    if kind in ("int", "bytes"):
        return dict(
            figures, result="%d/%d examples equal" % (count - differing, count), verdict="FAIL" if differing else "ok"
        )
    if not differing:
        return dict(figures, max_ulps=0, result="%d/%d examples exact" % (count, count), verdict="ok")
    a, b = a[~same], b[~same]
    apart = ulps(a, b)
    worst = int(apart.argmax())
    # Where the most ulps are: near 0 an ulp is small, so a tiny error is many of them.
    return dict(
        figures,
        max_ulps=int(apart[worst]),
        result="%d/%d examples exact; max %d ulp (ours %.9g, tf.Transform %.9g); max abs %.3g"
        % (count - differing, count, apart[worst], a[worst], b[worst], float(np.abs(a - b).max())),
        verdict="ok" if apart[worst] <= 2 else "FAIL",
    )


def compare_tables(label, kinds, ours, theirs):
    rows = []
    for name in sorted(kinds):
        row = {"check": "%s %s (%s)" % (label, name, kinds[name]), "feature": name, "kind": kinds[name]}
        row.update(compare_feature(kinds[name], ours[name], theirs[name]))
        row.setdefault("verdict", "FAIL")
        rows.append(row)
    return rows


def bitwise_differences(served, data):
    """[[example, feature]] where `data` holds other bits than `served` (tables of the same
    features, per example in the same order; floats by their bits, NaN too), over the examples
    both hold."""
    count = min(len(served[name]) for name in served)

    def bits(values):  # strings by their bytes: an object array's are its pointers
        return values.tolist() if values.dtype == object else values.tobytes()

    return [
        [i, name]
        for i in range(count)
        for name in sorted(served)
        if served[name][i].dtype != data[name][i].dtype
        or bits(served[name][i]) != bits(data[name][i])
        or served[name][i].shape != data[name][i].shape
    ]


def data_against_transform_fn(work, output_dir, split="raw", transform_dir=None):
    """The examples written in `output_dir`/data against the transform_fn of `transform_dir`
    (`output_dir`'s own by default), loaded by tft.TFTransformOutput and applied to `split`'s
    raw examples in input order, bit for bit: {"examples" (raw), "written", "differing":
    [[example, feature]]}."""
    import tensorflow_transform as tft

    output = tft.TFTransformOutput(transform_dir or output_dir)
    served = transformed(output, work, probes=False, split=split)
    data = written(output_dir, output.transformed_feature_spec())
    examples = len(next(iter(served.values())))
    return {
        "examples": examples,
        "written": len(next(iter(data.values()))),
        "differing": bitwise_differences(served, data),
    }


def data_row(work, side, split="raw", transform_side=None):
    """The row of `data_against_transform_fn`: `side`'s data/ of `split`, against the
    transform_fn of `transform_side` (`side`'s own by default)."""
    transform_dir = os.path.join(work, transform_side or side)
    check = data_against_transform_fn(work, os.path.join(work, side), split, transform_dir)
    shown = ", ".join("example %d %s" % tuple(d) for d in check["differing"][:5])
    return dict(
        check,
        check="data: %s/data = %s"
        % (side, "its transform_fn" if not transform_side else transform_side + "'s transform_fn"),
        result="%d/%d examples written, %d with other bits%s"
        % (check["written"], check["examples"], len(set(i for i, _ in check["differing"])), shown and ": " + shown),
        verdict="ok" if check["written"] == check["examples"] and not check["differing"] else "FAIL",
    )


def compare_vocabularies(outputs, output_dirs):
    """Rows for the vocabulary names (each output's asset_map, which vocabulary_by_name reads) and each vocabulary."""
    names = {}
    for side, directory in zip(SIDES, output_dirs):
        path = os.path.join(directory, "transformed_metadata", "asset_map")
        if os.path.exists(path):
            with open(path) as f:
                names[side] = sorted(json.load(f))
        else:
            names[side] = []
    rows = [
        {
            "check": "vocabulary names",
            "names": names,
            "result": "ours %s; tf.Transform %s" % (names["ours"], names["tft"]),
            "verdict": "ok" if names["ours"] == names["tft"] else "FAIL",
        }
    ]
    for name in sorted(set(names["ours"]) | set(names["tft"])):
        ours, theirs = (output.vocabulary_by_name(name) for output in outputs)
        row = {"check": "vocabulary %s" % name, "vocabulary": name, "terms": len(theirs)}
        if ours == theirs:
            rows.append(dict(row, result="equal, %d terms" % len(ours), verdict="ok"))
            continue
        at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
        result = "ours %d terms, tf.Transform %d; line %d: ours %r, tf.Transform %r" % (
            len(ours),
            len(theirs),
            at + 1,
            ours[at : at + 1],
            theirs[at : at + 1],
        )
        rows.append(dict(row, result=result, verdict="FAIL"))
    return rows


def compare_outputs(work, probes=True, buckets=BUCKETS, oracles=None):
    """The report's rows: {"check", "result", "verdict" ("ok", "FAIL", "approx." or "info"), and
    the row's figures}. `probes`: transform_raw_features of PROBES too; `buckets`: outputs whose
    values may differ (tf.Transform's quantiles are approximate); `oracles`: functions
    (work, our transform_raw_features) that each give a row (by default `elementwise_oracle`)."""
    import tensorflow_transform as tft

    output_dirs = [os.path.join(work, side) for side in SIDES]
    outputs = [tft.TFTransformOutput(directory) for directory in output_dirs]
    ours_spec, spec = (output.transformed_feature_spec() for output in outputs)
    differing = sorted(name for name in set(ours_spec) | set(spec) if ours_spec.get(name) != spec.get(name))
    rows = [
        {
            "check": "transformed_feature_spec",
            "features": sorted(spec),
            "differing": differing,
            "result": "equal, %d features" % len(spec)
            if not differing
            else "; ".join("%s: ours %s, tf.Transform %s" % (n, ours_spec.get(n), spec.get(n)) for n in differing),
            "verdict": "ok" if not differing else "FAIL",
        }
    ]
    ours_raw, raw = outputs[0].raw_feature_spec(), raw_feature_spec(work)
    rows.append(
        {
            "check": "raw_feature_spec",
            "features": sorted(ours_raw),
            "result": "equal to the raw schema's, %d features" % len(raw)
            if ours_raw == raw
            else "ours %s; the raw schema's %s" % (ours_raw, raw),
            "verdict": "ok" if ours_raw == raw else "FAIL",
        }
    )
    ours_domains, domains = (output.transformed_domains() for output in outputs)
    rows.append(
        {
            "check": "transformed_domains",
            "result": "equal" if ours_domains == domains else "ours %s; tf.Transform %s" % (ours_domains, domains),
            "verdict": "info",
        }
    )
    rows += compare_vocabularies(outputs, output_dirs)
    if differing:
        return rows  # the examples cannot be read alike
    kinds = kinds_of(spec, buckets)
    ours, theirs = (transformed(output, work, probes) for output in outputs)
    rows += compare_tables("transform_raw_features", kinds, ours, theirs)
    rows += [oracle(work, ours) for oracle in (oracles if oracles is not None else [elementwise_oracle])]
    rows.append(data_row(work, "ours"))
    ours_data, theirs_data = (written(directory, spec) for directory in output_dirs)
    rows += compare_tables("data", kinds, canonical(ours_data, kinds), canonical(theirs_data, kinds))
    return rows


def _float32_of(exact):
    """`exact` (a Fraction) rounded once to the nearest float32, ties to even."""
    import numpy as np

    near = np.float32(float(exact))
    candidates = [np.nextafter(near, np.float32(-np.inf)), near, np.nextafter(near, np.float32(np.inf))]
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - exact), int(c.view(np.uint32)) & 1))


def exact_mean(values):
    """The mean of float32 `values` as a fraction."""
    exact = [Fraction(float(v)) for v in values]
    return sum(exact) / len(exact)


def exact_z_scores(values):
    """The exact oracle of a z-score over float32 `values` (1-D): their mean and population
    variance as fractions, each rounded once to float32, then (v - mean) / sqrt(var) in float32."""
    import numpy as np

    mean = exact_mean(values)
    variance = sum((Fraction(float(v)) - mean) ** 2 for v in values) / len(values)
    return (np.float32(values) - _float32_of(mean)) / np.sqrt(_float32_of(variance))


def exact_centered(values):
    """`values` less their exact mean rounded once to float32 (x - tft.mean(x)), in float32."""
    import numpy as np

    return np.float32(values) - _float32_of(exact_mean(values))


def scaled_0_1(values):
    """scale_to_0_1 of float32 `values` over their least and greatest, in float32 (exact: no sum)."""
    import numpy as np

    values = np.float32(values)
    low, high = values.min(), values.max()
    return (values - low) / (high - low) * np.float32(1.0) + np.float32(0.0)


def raw_columns(work, features):
    """{feature: float32 values of every raw example, one each} for raw features of one value or
    none (a missing one 0, as TFX's modules fill it in)."""
    import numpy as np
    import tensorflow as tf

    raw_spec = raw_feature_spec(work)
    columns = {name: [] for name in features}
    for records in raw_records(work, probes=False):
        parsed = tf.io.parse_example(records, {name: raw_spec[name] for name in features})
        for name, tensor in parsed.items():
            if isinstance(tensor, tf.SparseTensor):
                tensor = tf.sparse.to_dense(tf.SparseTensor(tensor.indices, tensor.values, [tensor.dense_shape[0], 1]))
            columns[name] += np.float32(tensor.numpy()).reshape(-1).tolist()
    return {name: np.float32(values) for name, values in columns.items()}


def oracle_row(output, want, got):
    """A row: our `output` (`got`, by example) against the oracle's values (`want`, an array
    with a row an example), bit for bit."""
    import numpy as np

    got = np.stack(got[: len(want)]).reshape(want.shape)
    apart = int((got.view(np.uint32) != want.view(np.uint32)).reshape(len(want), -1).any(axis=1).sum())
    return {
        "check": "oracle %s" % output,
        "feature": output,
        "differing": apart,
        "result": "%d/%d examples exact" % (len(want) - apart, len(want)),
        "verdict": "ok" if not apart else "FAIL",
    }


def column_oracle(output, features, want):
    """An oracle (for `compare_outputs`): our `output` is `want(columns)` bit for bit, where
    `columns` are `raw_columns` of `features` over every raw example."""

    def oracle(work, ours):
        return oracle_row(output, want(raw_columns(work, features)), ours[output])

    return oracle


def elementwise_oracle(work, ours):
    """A row: our xn_z (`ours`: transform_raw_features, by example) against `exact_z_scores`
    of each column of [x, n] over every raw example."""
    import numpy as np

    columns = raw_columns(work, ["x", "n"])
    want = np.stack([exact_z_scores(columns["x"]), exact_z_scores(columns["n"])], axis=1)
    return oracle_row("xn_z", want, ours["xn_z"])


def as_listed(array):
    """An example's values as JSON holds them: float32 by their bits."""
    if array.dtype.kind == "f":
        return array.astype("float32").view("uint32").tolist()
    return [v.hex() if isinstance(v, bytes) else v for v in array.tolist()]


def reading(output, work, raw_spec):
    """What a trainer reads of a transform's output through `output`, a TFTransformOutput
    (tf.Transform's, or tf2_mapreduce's, which must answer alike): the specs, the buckets'
    counts, every vocabulary, transform_raw_features of every raw example and probe, and
    which outputs it gives without the raw feature n (a request without a label). As JSON.
    `raw_spec`: the raw examples' (tft_beam's own output has no raw schema to read it from)."""
    import tensorflow as tf

    spec = output.transformed_feature_spec()
    try:
        raw_read = sorted((n, repr(f)) for n, f in output.raw_feature_spec().items())
    except OSError as e:
        raw_read = "OSError: " + str(e).split(" does not exist")[0].rsplit("/", 2)[-2] + " missing"
    buckets = {}
    for name in sorted(spec):
        try:
            buckets[name] = output.num_buckets_for_transformed_feature(name)
        except ValueError:
            buckets[name] = None
    path = os.path.join(output.transform_savedmodel_dir, "..", "transformed_metadata", "asset_map")
    names = sorted(json.load(open(path))) if os.path.exists(path) else []
    table = {}
    for records in raw_records(work):
        extend(table, output.transform_raw_features(tf.io.parse_example(records, raw_spec)))
    records = next(iter(raw_records(work)))
    without_n = output.transform_raw_features(
        {k: v for k, v in tf.io.parse_example(records, raw_spec).items() if k != "n"}
    )
    return {
        "transformed_feature_spec": sorted((n, repr(f)) for n, f in spec.items()),
        "raw_feature_spec": raw_read,
        "num_buckets": buckets,
        "vocabularies": {n: [t.hex() for t in output.vocabulary_by_name(n)] for n in names},
        "values": {n: [as_listed(v) for v in values] for n, values in sorted(table.items())},
        "without_n": sorted(without_n),
    }


def compare_eval(work, side, buckets=BUCKETS):
    """The rows of the eval split: `side`'s data/ (ours, by --transform_output) against our
    transform_fn bit for bit, and against tf.Transform's TransformDataset (work/tft/eval),
    each feature as the raw split's data/ are compared."""
    import tensorflow_transform as tft

    spec = tft.TFTransformOutput(os.path.join(work, "tft")).transformed_feature_spec()
    kinds = kinds_of(spec, buckets)
    rows = [data_row(work, side, "eval", transform_side="ours")]
    ours, theirs = (written(os.path.join(work, d), spec) for d in (side, os.path.join("tft", "eval")))
    rows += compare_tables("eval data", kinds, canonical(ours, kinds), canonical(theirs, kinds))
    return rows


def print_table(header, rows):
    print("| %s |" % " | ".join(header))
    print("|%s" % ("---|" * len(header)))
    for row in rows:
        print("| %s |" % " | ".join(str(cell).replace("|", "\\|") for cell in row))


def compare(work):
    rows = compare_outputs(work)
    print_table(("check", "result", "verdict"), [(row["check"], row["result"], row["verdict"]) for row in rows])
    return 1 if any(row["verdict"] == "FAIL" for row in rows) else 0


# The driver, in this repo's venv.


def run(python, side, work, stdout=None):
    """Runs this script as `side` with `python`, its output in `work`/`side`.log (and stdout in
    `stdout`, if given). Returns its exit status and wall seconds."""
    log = os.path.join(work, side + ".log")
    start = time.monotonic()
    with open(log, "w") as f:
        command = [python, os.path.abspath(__file__), "--side", side, "--work", work]
        status = subprocess.call(command, stdout=stdout or f, stderr=f)
    seconds = time.monotonic() - start
    if status and not (side == "compare" and status == 1):  # compare's 1 is its verdict
        with open(log) as f:
            sys.stderr.write("".join(f.readlines()[-30:]))
        raise SystemExit("%s failed (status %d): %s" % (side, status, log))
    return status, seconds


def main(argv):
    if len(argv) > 1:
        raise app.UsageError("no arguments but flags")
    work = FLAGS.work or tempfile.mkdtemp(prefix="compare_tft-")
    if FLAGS.side == "compare":
        return compare(work)
    if FLAGS.side:
        return run_side(work, FLAGS.side)
    for side in SIDES:  # a previous run's output: Beam would add files to it
        shutil.rmtree(os.path.join(work, side), ignore_errors=True)
    write_raw(work, FLAGS.examples)
    print("%d raw examples in %d files, and %d probes, in %s\n" % (FLAGS.examples, SHARDS, len(PROBES), work))
    timings = []
    for side, python in (("tft", FLAGS.tft_python), ("ours", sys.executable)):
        load = os.getloadavg()[0]
        _, seconds = run(python, side, work)
        with open(os.path.join(work, side + ".json")) as f:
            job = json.load(f)["seconds"]
        timings.append((side, "%.1f" % seconds, "%.1f" % job, "%.2f" % load))
    sys.stdout.flush()
    status, _ = run(FLAGS.tft_python, "compare", work, stdout=sys.stdout)
    print()
    print_table(("side", "process wall s (start, imports, job)", "job wall s", "load avg (1 min) before"), timings)
    return status


if __name__ == "__main__":
    define_flags()
    sys.exit(app.run(main))
