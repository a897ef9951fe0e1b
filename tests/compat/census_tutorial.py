"""TFX's census tutorial (a notebook) trained with tf_keras on our transform's output, as
written but for what its Beam pipeline was: tf.Transform, Beam and tfx_bsl are not
imported here.

python census_tutorial.py train WORK OURS OURS_EVAL REPORT
    Runs the notebook's code cells in order in WORK, which holds its data files
    (adult.data, adult.test), with these changes, each named by what it is:
    - `import tensorflow_transform as tft` imports tf2_mapreduce.transform (the line a
      user changes), and `from tensorflow_transform.keras_lib import tf_keras` is
      `import tf_keras` under TF_USE_LEGACY_KERAS=1 (what that module does on this
      TensorFlow, whose tf.keras is Keras 3);
    - the Beam pipeline (`transform_data`, its imports, and its call) is not run:
      `output_dir` is OURS, our transform of adult.data's examples, and OURS_EVAL our
      --transform_output of adult.test's;
    - where the trainer reads the pipeline's files (`TRANSFORMED_*_DATA_FILEBASE`,
      plain TFRecords), it reads our data/ of each, GZIP'd;
    - what prints Beam's version is left out, and so are a drawing of the model
      (`plot_model`: pydot and graphviz) and, where matplotlib is not installed, its
      import and the plot of the losses;
    - its other version, trained with tf.estimator, is not run (TensorFlow has no
      tf.estimator since 2.16): the cells from its heading on.
    REPORT (JSON): the training's epochs, whether its losses were finite, its
    evaluation, the notebook's `Transform` module applied to every row of adult.data (encoded by the notebook's
    `encode_example`), per feature in row order, floats by their bits; the serving
    model's scores for the notebook's example batch, in memory and reloaded by the
    notebook; where it exported the model, and that batch (hex), for `serve`.
python census_tutorial.py serve SAVED REPORT_IN REPORT
    SAVED loaded by TensorFlow alone (tf2_mapreduce, tf.Transform and tf_keras refused on
    import): its serving signature's scores for REPORT_IN's example batch, as bits.
"""

import ast
import json
import linecache
import math
import os
import sys

import tensorflow as tf

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts")
)

import compare_tft  # noqa: E402
import example_pipelines  # noqa: E402

NAME = "tfx_census_tutorial"
BEAM_SIDE = ("apache_beam", "tfx_bsl", "tensorflow_transform.beam")  # its pipeline's imports
KERAS_LIB = "tensorflow_transform.keras_lib"
DRAWINGS = ("plot_model",)
# The heading of the notebook's other version, trained with tf.estimator, which TensorFlow
# 2.16 and later do not have: the cells from there on are not run.
ESTIMATOR = "tf.estimator"


class Refused:
    """An import hook refusing packages by name: what a run must not need."""

    def __init__(self, *roots):
        self.roots = roots

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.roots:
            raise ImportError("refused here: %s" % name)
        return None


def _imports(node, modules):
    names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    return any(name == m or name.startswith(m + ".") for name in names for m in modules)


def _calls(node, names):
    """Whether a statement calls a function or method of one of `names` where it stands."""
    return any(
        isinstance(at, ast.Call) and getattr(at.func, "attr", getattr(at.func, "id", None)) in names
        for at in example_pipelines._outside_definitions(node)
    )


class _Reader(ast.NodeTransformer):
    """`reader=tf.data.TFRecordDataset` read GZIP'd files: our data/ is compressed.
    `changed`: how many it changed."""

    changed = 0

    def visit_keyword(self, node):
        if node.arg == "reader" and ast.unparse(node.value) == "tf.data.TFRecordDataset":
            node.value = (
                ast.parse("lambda files: tf.data.TFRecordDataset(files, compression_type='GZIP')").body[0].value
            )
            self.changed += 1
        return node


def notebook(ours, ours_eval):
    """The notebook's statements, changed as the module's docstring says, and its source
    (for AutoGraph, which converts its functions from their source, as for the author's).
    Raises ValueError where a statement left out binds a name the rest uses, or a change
    did not find the one statement it changes."""
    import tf2_mapreduce.transform as tft

    path = example_pipelines.PIPELINES[NAME].module
    source = example_pipelines.module_source(None, NAME, before=ESTIMATOR)
    tree = example_pipelines._with_tft(ast.parse(source), tft, path)
    body, dropped, beam_names, changed = [], [], set(), []
    bases = {
        "TRANSFORMED_TRAIN_DATA_FILEBASE": "data/part",
        "TRANSFORMED_TEST_DATA_FILEBASE": os.path.relpath(os.path.join(ours_eval, "data", "part"), ours),
    }
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and _imports(node, BEAM_SIDE):
            beam_names |= example_pipelines._binds(node)
            dropped.append(node)
            continue
        if isinstance(node, ast.FunctionDef) and example_pipelines._reads(node) & beam_names:
            beam_names.add(node.name)  # what runs the pipeline (`transform_data`)
            dropped.append(node)
            continue
        if isinstance(node, ast.ImportFrom) and node.module == KERAS_LIB:
            node = ast.Import(names=[ast.alias(name="tf_keras")])
            changed.append(KERAS_LIB)
        elif example_pipelines._names(example_pipelines._evaluated(node)) & beam_names or _calls(node, DRAWINGS):
            dropped.append(node)  # the pipeline's run (`transform_data(...)`), a print of Beam's version, a drawing
            continue
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name == "output_dir":
                node.value = ast.Constant(ours)
                changed.append(name)
            elif name in bases:
                node.value = ast.Constant(bases[name])
                changed.append(name)
        reader = _Reader()
        body.append(reader.visit(node))
        changed += ["reader"] * reader.changed
    # What does not import here (matplotlib) and what would read it (a plot of the losses).
    kept = example_pipelines._without_left_out(body, path)
    used = {name for node in kept for name in example_pipelines._names(example_pipelines._evaluated(node))}
    used |= {name for node in kept for name in example_pipelines._binds(node)}
    for node in dropped:
        if example_pipelines._binds(node) & used - beam_names:
            raise ValueError(
                "%s:%d: left out, it binds %s, which the rest uses"
                % (path, node.lineno, sorted(example_pipelines._binds(node) & used))
            )
    if sorted(changed) != sorted([KERAS_LIB, "output_dir", "reader", *bases]):
        raise ValueError("%s: the changes made are %s, not one each" % (path, sorted(changed)))
    tree.body = kept
    return ast.fix_missing_locations(tree), source


def _bits(tensor):
    return compare_tft.as_listed(tensor.numpy().reshape(-1))


def train(work, ours, ours_eval, report):
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    sys.meta_path.insert(0, Refused("tensorflow_transform", "apache_beam", "tfx_bsl"))
    os.chdir(work)
    ran = {"__name__": "census_tutorial"}
    tree, source = notebook(ours, ours_eval)
    filename = "<%s>/%s" % (NAME, example_pipelines.PIPELINES[NAME].module)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(tree, filename, "exec"), ran)
    rows = ran["pandas_train"]
    serialized = tf.constant([ran["encode_example"](rows.loc[i]).SerializeToString() for i in range(len(rows))])
    features, labels = ran["transform"](tf.io.parse_example(serialized, ran["RAW_DATA_FEATURE_SPEC"]))
    transformed = {name: [_bits(v) for v in value] for name, value in features.items()}
    transformed[ran["LABEL_KEY"]] = [_bits(v) for v in labels]
    history = ran["history"].history
    batch = ran["serialized_example_batch"]
    out = {
        "epochs": len(history["loss"]),
        "train_epochs": ran["TRAIN_NUM_EPOCHS"],
        "losses_finite": all(math.isfinite(x) for x in history["loss"] + history["val_loss"]),
        "evaluation": {k: float(v) for k, v in ran["metric_values"].items()},
        "rows": len(rows),
        "transformed": transformed,
        "scores": _bits(ran["serving_model"](batch)["scores"]),
        "reloaded_scores": _bits(ran["run_model"](batch)["scores"]),
        "saved_model_dir": str(ran["saved_model_dir"]),
        "batch": [record.hex() for record in batch.numpy()],
    }
    with open(report, "w") as f:
        json.dump(out, f)


def serve(saved, report_in, report):
    sys.meta_path.insert(0, Refused("tf2_mapreduce", "tensorflow_transform", "tf_keras"))
    with open(report_in) as f:
        batch = tf.constant([bytes.fromhex(record) for record in json.load(f)["batch"]])
    scores = tf.saved_model.load(saved).signatures["serving_default"](batch)["scores"]
    with open(report, "w") as f:
        json.dump(
            {"scores": _bits(scores), "imported": sorted(m for m in sys.modules if m.startswith("tf2_mapreduce"))}, f
        )


if __name__ == "__main__":
    {"train": train, "serve": serve}[sys.argv[1]](*sys.argv[2:])
