"""TFX's and tf.Transform's example pipelines against tf.Transform 1.21 (scripts/example_pipelines.py):
each module file as its authors ship it, loaded alike on both sides (what cannot import in a
venv left out), its import line changed on ours alone, over the data TFX ships beside it (or
made in its shape). Both outputs read by tft.TFTransformOutput: spec, raw spec, every
vocabulary, every example of both splits (the second through our --transform_output and
tf.Transform's TransformDataset), and our data/ against our transform_fn, bit for bit. Where
tf.Transform combines an analyzer in float32 (a mean, a variance), ours is checked against an
exact oracle, and tf.Transform's difference printed beside."""

import ast
import json
import math
import os
import shutil
import subprocess
import sys

import compare_tft
import example_pipelines
import pytest
from peers import HERE, made_once, run_peer

import tf2_mapreduce as mr
import tf2_mapreduce.transform as tft

pytestmark = [pytest.mark.compat, pytest.mark.cluster]

# Beam's run and the comparison: 10-20 s a pipeline on a quiet 2-core machine.
PEER_TIMEOUT = 300
OURS_TIMEOUT = 120
# Training the taxi model 20 steps and saving it; loading and serving it: 10-15 s each here.
TRAINER_TIMEOUT = 180
# Per pipeline: examples of the split analyzed and of the other (TFX's data, split 2:1, or
# TFX's own splits), and the vocabularies it writes.
TAXI_VOCABULARIES = ["vocab_compute_and_apply_vocabulary_1_vocabulary", "vocab_compute_and_apply_vocabulary_vocabulary"]
WORKSHOP_VOCABULARIES = [
    "company",
    "dropoff_census_tract",
    "dropoff_community_area",
    "payment_type",
    "pickup_census_tract",
    "pickup_community_area",
    "trip_start_day",
    "trip_start_hour",
    "trip_start_month",
]
CENSUS_CATEGORICAL = [
    "education",
    "marital-status",
    "native-country",
    "occupation",
    "race",
    "relationship",
    "sex",
    "workclass",
]
EXPECTED = {
    "taxi": (10002, 5000, TAXI_VOCABULARIES),
    "taxi_workshop": (10002, 5000, WORKSHOP_VOCABULARIES),
    "penguin": (234, 100, []),
    "imdb": (67, 33, ["vocab_compute_and_apply_vocabulary_vocabulary"]),
    "mnist": (400, 200, []),
    "tft_simple": (200, 100, ["vocab_compute_and_apply_vocabulary_vocabulary"]),
    "tft_census_v2": (2000, 1000, CENSUS_CATEGORICAL),
    "tft_sentiment_v2": (67, 33, ["vocab_compute_and_apply_vocabulary_vocabulary"]),
    "tfx_census_tutorial": (2000, 1000, CENSUS_CATEGORICAL),
}
# Where tf.Transform combines a mean or a variance in float32, how far its values were from
# the exact oracle's (ours) at most, in float32 ulps (its record batches are of a fixed size:
# the same each run). Near zero an ulp is small: 364 ulps of the simple example's x - mean(x)
# is its mean 2.4e-7 off. A difference beyond is another meaning, not a rounding.
TFT_ULPS = {"taxi": 4, "taxi_workshop": 4, "penguin": 137, "tft_simple": 364}


@pytest.fixture(scope="module", params=sorted(example_pipelines.PIPELINES))
def compared(request, tft_python, tfx_wheel, inprocess, tmp_path_factory, worker_id):
    """Pipeline `request.param` on both sides: ours on the in-process cluster (the split analyzed
    into ours/, the other through --transform_output into ours_eval/), then tf.Transform's run
    and every comparison in one process of its venv: the report, with the pipeline's name."""
    name = request.param

    def make():
        work = str(tmp_path_factory.mktemp("pipeline_" + name))
        example_pipelines.write_pipeline_data(name, tfx_wheel, work, tft)
        fn = example_pipelines.make_fn(name, tfx_wheel)(tft)
        job = mr.Transform(fn, schema=compare_tft.schema_path(work), num_shards=2)
        inprocess.run(job, [compare_tft.raw_pattern(work)], output_dir=os.path.join(work, "ours"))
        applied = mr.Transform(transform_output=os.path.join(work, "ours"), num_shards=2)
        inprocess.run(applied, [compare_tft.eval_pattern(work)], output_dir=os.path.join(work, "ours_eval"))
        report = os.path.join(work, "report.json")
        args = [os.path.join(HERE, "peer_tft.py"), "pipeline", name, tfx_wheel, work, report]
        run_peer(tft_python, args, os.path.join(work, "peer_tft.log"), PEER_TIMEOUT)
        with open(report) as f:
            return dict(json.load(f), name=name, work=work)

    return made_once(tmp_path_factory, worker_id, "pipeline_" + name, make, PEER_TIMEOUT + OURS_TIMEOUT)


def row(compared, check):
    (found,) = [r for r in compared["rows"] if r["check"] == check]
    return found


def test_the_specs_and_every_vocabulary_are_tfts(compared):
    spec = row(compared, "transformed_feature_spec")
    assert spec["differing"] == [], spec["result"]
    assert spec["features"]
    raw = row(compared, "raw_feature_spec")
    assert raw["verdict"] == "ok", raw["result"]
    names = row(compared, "vocabulary names")["names"]
    assert names["ours"] == names["tft"] == EXPECTED[compared["name"]][2]
    for name in names["tft"]:
        vocabulary = row(compared, "vocabulary %s" % name)
        assert vocabulary["verdict"] == "ok" and vocabulary["terms"] > 0, vocabulary["result"]
    if example_pipelines.PIPELINES[compared["name"]].schema:
        # The module makes its raw schema (tft.DatasetMetadata.from_feature_spec) as it is imported.
        schema = row(compared, "module schema")
        assert schema["verdict"] == "ok", schema["result"]


@pytest.mark.parametrize("table", ["transform_raw_features", "data", "eval data"])
def test_every_example_is_tfts_or_an_exact_oracles(compared, table):
    """Every output of every example (transform_raw_features of the raw split; data/ of both
    splits, as multisets: Beam writes in no fixed order) equal to tf.Transform's, bit for bit;
    an output of a float32 combine there equal to the exact oracle's, and tf.Transform's
    difference printed (and bounded by what was measured: TFT_ULPS)."""
    analyzed, other, _ = EXPECTED[compared["name"]]
    oracles = example_pipelines.PIPELINES[compared["name"]].oracles
    rows = [r for r in compared["rows"] if r["check"].startswith(table + " ")]
    assert sorted(r["feature"] for r in rows) == row(compared, "transformed_feature_spec")["features"]
    for r in rows:
        assert r["examples"] == (other if table == "eval data" else analyzed), r["check"]
        if r["feature"] in oracles:
            oracle = row(compared, "oracle " + r["feature"])
            assert oracle["differing"] == 0, oracle["result"]
            print("%s %s against tf.Transform's: %s" % (compared["name"], r["check"], r["result"]))
            assert "differing" in r and r.get("max_ulps", 0) <= TFT_ULPS[compared["name"]], r["result"]
        else:
            assert r["differing"] == 0 and r["verdict"] == "ok", r["result"]


@pytest.mark.parametrize("side", ["ours", "ours_eval"])
def test_our_data_is_our_transform_fn_bit_for_bit(compared, side):
    """Both splits' data/ (the second through --transform_output) against our transform_fn,
    loaded by tf.Transform, every example bit for bit."""
    analyzed, other, _ = EXPECTED[compared["name"]]
    (check,) = [r for r in compared["rows"] if r["check"].startswith("data: %s/data" % side)]
    examples = analyzed if side == "ours" else other
    assert (check["examples"], check["written"]) == (examples, examples)
    assert check["differing"] == [], check["result"]


@pytest.mark.parametrize("compared", ["taxi"], indirect=True)
def test_the_taxi_trainer_needs_tensorflow_alone_and_its_model_serves_our_transform(compared, tfx_wheel, tmp_path):
    """TFX's taxi module's model and both its serving signatures, built on our TFTransformOutput
    and trained on our data/ (tests/compat/taxi_trainer.py: no TFX, no tf.Transform), from a
    copy of our output removed before the model is served; loaded by TensorFlow alone (an
    import of tf2_mapreduce fails there), its transform_features of the eval split's raw
    examples is our --transform_output data/ of them, every example bit for bit, in input order."""
    work, saved, report = compared["work"], str(tmp_path / "served"), str(tmp_path / "served.json")
    copy = str(tmp_path / "transform_output")
    shutil.copytree(os.path.join(work, "ours"), copy)
    trainer = os.path.join(HERE, "taxi_trainer.py")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    for args in (["train", tfx_wheel, copy, saved], ["serve", saved, compare_tft.eval_pattern(work), report]):
        done = subprocess.run([sys.executable, trainer, *args], capture_output=True, timeout=TRAINER_TIMEOUT, env=env)
        assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
        shutil.rmtree(copy, ignore_errors=True)  # the model must hold what it serves
    with open(report) as f:
        served = json.load(f)
    _, examples, _ = EXPECTED["taxi"]
    assert served["outputs_shape"] == [examples, 1]
    spec = tft.TFTransformOutput(os.path.join(work, "ours")).transformed_feature_spec()
    data = compare_tft.written(os.path.join(work, "ours_eval"), spec)
    assert sorted(served["transformed"]) == sorted(data)
    for name, values in data.items():
        listed = [compare_tft.as_listed(v) for v in values]
        assert served["transformed"][name] == listed, name
        assert len(listed) == examples


def _adult_columns():
    """The census data's columns in the order of its files, as the tutorial lists them."""
    tree = ast.parse(example_pipelines.module_source(None, "tfx_census_tutorial"))
    (columns,) = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "ORDERED_CSV_COLUMNS"
    ]
    return ast.literal_eval(columns)


def _write_adult(work, split, path, first_line=None):
    """The census pipeline's raw examples of `split` as the data's CSV file (its values'
    leading space kept; `fnlwgt`, not in the schema, made up), in input order."""
    import tensorflow as tf

    spec = tft.TFTransformOutput(os.path.join(work, "ours")).raw_feature_spec()
    lines = [first_line] if first_line else []
    columns = _adult_columns()
    for batch in compare_tft.raw_records(work, probes=False, split=split):
        parsed = {name: value.numpy() for name, value in tf.io.parse_example(batch, spec).items()}
        for i in range(len(batch)):
            row = {name: parsed[name][i] for name in spec}
            row["fnlwgt"] = 100000 + len(lines)
            # A float32 written by its shortest float64 repr parses back to the same bits.
            lines.append(
                ",".join(v.decode() if isinstance(v, bytes) else repr(float(v)) for v in map(row.get, columns))
            )
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


@pytest.mark.parametrize("compared", ["tfx_census_tutorial"], indirect=True)
def test_the_census_tutorials_keras_trainer_runs_on_our_output_and_serves_our_transform(compared, tft_python, tmp_path):
    """TFX's census tutorial, its tf_keras trainer run as written on our output where its Beam
    pipeline wrote (tests/compat/census_tutorial.py: tf.Transform and Beam refused on import;
    its data files made of the pipeline's raw examples): it trains and evaluates (on the raw
    CSV too, through its `Transform` module); that module gives every raw training example
    our data/ of it, bit for bit; its exported serving model, moved out and our output
    removed, loaded by TensorFlow alone, scores as the one in memory did."""
    work = compared["work"]
    _write_adult(work, "raw", str(tmp_path / "adult.data"))
    _write_adult(work, "eval", str(tmp_path / "adult.test"), first_line="|1x3 Cross validator")
    ours = str(tmp_path / "transform_output")
    shutil.copytree(os.path.join(work, "ours"), ours)  # the notebook exports its model into it
    trained, served = str(tmp_path / "trained.json"), str(tmp_path / "served.json")
    runner = os.path.join(HERE, "census_tutorial.py")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=os.path.dirname(os.path.dirname(HERE)))
    env.pop("WEB_TEST_BROWSER", None)  # the notebook's own test mode: two rows, one epoch
    args = ["train", str(tmp_path), ours, os.path.join(work, "ours_eval"), trained]
    done = subprocess.run([tft_python, runner, *args], capture_output=True, timeout=TRAINER_TIMEOUT, env=env)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    with open(trained) as f:
        report = json.load(f)
    assert report["epochs"] == report["train_epochs"] == 20 and report["losses_finite"]
    assert sorted(report["evaluation"]) == ["accuracy", "loss"]
    assert all(math.isfinite(v) for v in report["evaluation"].values())
    analyzed, _, _ = EXPECTED["tfx_census_tutorial"]
    assert report["rows"] == analyzed
    spec = tft.TFTransformOutput(ours).transformed_feature_spec()
    data = compare_tft.written(ours, spec)
    assert sorted(report["transformed"]) == sorted(data)
    for name, values in data.items():
        assert report["transformed"][name] == [compare_tft.as_listed(v.reshape(-1)) for v in values], name
    assert report["reloaded_scores"] == report["scores"] and len(report["scores"]) == 3 * 2
    saved = str(tmp_path / "served_model")
    shutil.move(report["saved_model_dir"], saved)
    shutil.rmtree(ours)  # the model must hold what it serves
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        [sys.executable, runner, "serve", saved, trained, served],
        capture_output=True,
        timeout=TRAINER_TIMEOUT,
        env=env,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    with open(served) as f:
        assert json.load(f) == {"scores": report["scores"], "imported": []}
