"""scripts/example_pipelines.py's loader runs a published module as its author wrote it, but for
its one import line, or refuses: each way it could run another function is refused by name."""

import ast
import sys

import pytest
from helpers.processes import SCRIPTS

if SCRIPTS not in sys.path:
    sys.path.append(SCRIPTS)

import example_pipelines  # noqa: E402

import tf2_mapreduce.transform as OURS  # noqa: E402


def loaded(source, fn="preprocessing_fn"):
    """`source` run through the loader's steps, as `load_module` runs a module file."""
    tree = example_pipelines._with_tft(ast.parse(source), OURS, "m.py")
    tree.body = example_pipelines._without_left_out(tree.body, "m.py")
    tree.body = example_pipelines._lifted(tree, source, fn, "m.py")
    module = {}
    exec(compile(tree, "m.py", "exec"), module)
    return module


def test_only_the_import_line_changes_and_what_cannot_import_is_left_out():
    source = (
        "import tensorflow_transform as tft\n"
        "import not_installed_anywhere as beam\n"
        "SCALE = 3\n"
        "@beam.ptransform_fn\n"
        "def Shuffle(pcoll):\n"
        "    return pcoll\n"
        "def pipeline():\n"
        "    def preprocessing_fn(inputs):\n"
        "        return {'x': inputs['x'] * SCALE}\n"
        "    return Shuffle(preprocessing_fn)\n"
    )
    module = loaded(source)
    assert module["tft"] is OURS
    assert "Shuffle" not in module and module["SCALE"] == 3
    assert module["preprocessing_fn"]({"x": 2}) == {"x": 6}


def test_a_statement_left_out_that_rebinds_a_name_is_refused():
    source = (
        "import tensorflow_transform as tft\n"
        "import not_installed_anywhere as beam\n"
        "SCALE = 3\n"
        "SCALE = beam.scale(SCALE)\n"
        "def preprocessing_fn(inputs):\n"
        "    return inputs\n"
    )
    with pytest.raises(ValueError, match=r"m.py:4: SCALE, left out, is bound or read"):
        loaded(source)


def test_a_nested_function_reading_its_enclosing_names_is_refused():
    source = (
        "import tensorflow_transform as tft\n"
        "def pipeline(scale):\n"
        "    def preprocessing_fn(inputs):\n"
        "        return inputs * scale\n"
        "    return preprocessing_fn\n"
    )
    with pytest.raises(ValueError, match="preprocessing_fn reads scale of the function around it"):
        loaded(source)


@pytest.mark.parametrize(
    "imports",
    [
        "",
        "import tensorflow_transform as tftx\n",
        "import tensorflow_transform as tft\nimport tensorflow_transform as tft\n",
    ],
)
def test_a_module_without_exactly_one_import_line_to_change_is_refused(imports):
    source = imports + '"""import tensorflow_transform as tft"""\ndef preprocessing_fn(inputs):\n    return inputs\n'
    with pytest.raises(ValueError, match="not one"):
        loaded(source)


def test_of_a_notebook_what_the_function_reads_is_kept_and_what_changes_it_wherever_it_stands():
    source = (
        "import tensorflow_transform as tft\n"
        "train = download('adult.data')\n"
        "KEYS = [name for name in ('age',)]\n"
        "KEYS.append('hours')\n"
        "train.head(5)\n"
        "OOV = 1\n"
        "EPOCHS = len(train)\n"
        "def preprocessing_fn(inputs):\n"
        "    key = 'unused'\n"
        "    return {k: inputs[k] + OOV for k in KEYS}\n"
        "KEYS[0] = 'years'\n"
        "key = train.columns[0]\n"
        "transform_data(train)\n"
    )
    kept = example_pipelines._needed(ast.parse(source).body, ["preprocessing_fn"])
    assert [ast.unparse(node).split("\n")[0] for node in kept] == [
        "import tensorflow_transform as tft",
        "KEYS = [name for name in ('age',)]",
        "KEYS.append('hours')",
        "OOV = 1",
        "def preprocessing_fn(inputs):",
        "KEYS[0] = 'years'",
    ]
