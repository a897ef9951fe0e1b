"""The compat tier's tf.Transform side, run with the Python of tf.Transform's venv: one process a
test, Beam's run and the comparison together (Beam and TensorFlow take seconds to import).

    python peer_tft.py transform WORK REPORT [SIDE...] [--eval=SIDE]
        tf.Transform analyzes and transforms WORK's raw examples with scripts/compare_tft.py's
        preprocessing_fn into WORK/tft; compare_tft then compares WORK/ours with it, and each
        SIDE's WORK/SIDE/data with its own transform_fn, bit for bit; the rows go to REPORT (JSON).
        --eval=SIDE: WORK/eval's examples too, transformed by tf.Transform's TransformDataset
        into WORK/tft/eval, compared with WORK/SIDE (ours, by --transform_output).
        The report also holds what tft.TFTransformOutput reads of WORK/ours and WORK/tft
        (compare_tft.reading), for our TFTransformOutput to read alike.
    python peer_tft.py pipeline NAME WHEEL WORK REPORT
        tf.Transform runs example pipeline NAME (scripts/example_pipelines.py; TFX's read from
        WHEEL, tf.Transform's from tests/compat/published) over WORK's raw split into
        WORK/tft, and WORK/eval through TransformDataset; compare_tft then compares WORK/ours
        and WORK/ours_eval with them, as for `transform` (no probes; an exact oracle of each
        float output tf.Transform combines in float32; where the module makes its raw schema,
        tf.Transform's against the one ours made).
    python peer_tft.py vocab PATTERN SCHEMA OUT VOCABULARIES
        tf.Transform computes each vocabulary of VOCABULARIES (JSON: {file name: [feature,
        compute_and_apply_vocabulary's options]}) over PATTERN's examples into OUT/transform_fn/assets.

Both use benchmarks/tf_transform.py's pipeline on the FnApiRunner (what Beam's DirectRunner runs
here: it would first try to download Prism, which this network does not reach), with record
batches of a fixed size, so that each run's float statistics are the last one's.
"""

import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))
# Appended: the checkout gives the pipeline, the tf.Transform venv every package it has.
sys.path.append(REPO)

import compare_tft  # noqa: E402
import example_pipelines  # noqa: E402

from benchmarks import tf_transform  # noqa: E402

RUNNER = "FnApiRunner"
BATCH_SIZE = 1000


def transform(work, report, sides, eval_side=None):
    start = time.monotonic()
    tf_transform.run_tft(
        compare_tft.raw_pattern(work),
        compare_tft.schema_path(work),
        os.path.join(work, "tft"),
        compare_tft.preprocessing_fn,
        runner=RUNNER,
        batch_size=BATCH_SIZE,
        eval_pattern=compare_tft.eval_pattern(work) if eval_side else None,
    )
    beam_seconds = time.monotonic() - start
    rows = compare_tft.compare_outputs(work)
    if eval_side:
        rows += compare_tft.compare_eval(work, eval_side)
    checks = {side: compare_tft.data_row(work, side) for side in sides}
    import tensorflow_transform as tft

    readings = {
        side: compare_tft.reading(
            tft.TFTransformOutput(os.path.join(work, side)), work, compare_tft.raw_feature_spec(work)
        )
        for side in compare_tft.SIDES
    }
    with open(report, "w") as f:
        json.dump({"rows": rows, "data": checks, "readings": readings, "beam_seconds": beam_seconds}, f)


def pipeline(name, wheel, work, report):
    start = time.monotonic()
    tf_transform.run_tft(
        compare_tft.raw_pattern(work),
        compare_tft.schema_path(work),
        os.path.join(work, "tft"),
        example_pipelines.make_fn(name, wheel),
        runner=RUNNER,
        batch_size=BATCH_SIZE,
        eval_pattern=compare_tft.eval_pattern(work),
    )
    beam_seconds = time.monotonic() - start
    oracles = [
        compare_tft.column_oracle(output, *oracle)
        for output, oracle in example_pipelines.PIPELINES[name].oracles.items()
    ]
    rows = compare_tft.compare_outputs(work, probes=False, buckets=(), oracles=oracles)
    rows += compare_tft.compare_eval(work, "ours_eval", buckets=())
    if example_pipelines.PIPELINES[name].schema:
        rows.append(module_schema_row(name, wheel, work))
    with open(report, "w") as f:
        json.dump({"rows": rows, "beam_seconds": beam_seconds}, f)


def module_schema_row(name, wheel, work):
    """A row: the raw schema pipeline `name`'s module makes with tf.Transform (its
    DatasetMetadata.from_feature_spec) against the one ours made, which both sides read."""
    import tensorflow_transform
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    module = example_pipelines.load_module(name, wheel, tensorflow_transform)
    theirs = text_format.Parse(
        example_pipelines.module_schema(module, example_pipelines.PIPELINES[name].schema), schema_pb2.Schema()
    )
    ours = compare_tft.read_schema(work)
    return {
        "check": "module schema",
        "result": "equal, %d features" % len(ours.feature)
        if ours == theirs
        else "ours %s; tf.Transform %s" % (ours, theirs),
        "verdict": "ok" if ours == theirs else "FAIL",
    }


def vocabulary_fn(vocabularies):
    def make(tft):
        def fn(inputs):
            return {
                name: tft.compute_and_apply_vocabulary(inputs[feature], vocab_filename=name, **options)
                for name, (feature, options) in vocabularies.items()
            }

        return fn

    return make


def vocab(pattern, schema, out, vocabularies):
    make_fn = vocabulary_fn(json.loads(vocabularies))
    tf_transform.run_tft(pattern, schema, out, make_fn, runner=RUNNER, batch_size=BATCH_SIZE)


def main(argv):
    if argv[1:2] == ["transform"] and len(argv) >= 4:
        sides = [side for side in argv[4:] if not side.startswith("--eval=")]
        evals = [side.split("=", 1)[1] for side in argv[4:] if side.startswith("--eval=")]
        transform(argv[2], argv[3], sides, *evals[:1])
    elif argv[1:2] == ["pipeline"] and len(argv) == 6:
        pipeline(*argv[2:])
    elif argv[1:2] == ["vocab"] and len(argv) == 6:
        vocab(*argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
