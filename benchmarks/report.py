"""The report: a markdown table per kind of part, the targets, the rows as JSON if asked; the
benchmark fails where the contenders' results disagree."""

import json
import sys

from benchmarks.corpora import SMALL_EXAMPLES, WIDE_EXAMPLES
from benchmarks.names import (
    KERAS_ALL,
    KERAS_ALL_DEFAULT,
    KERAS_ALL_OURS,
    KERAS_FEW,
    KERAS_FEW_DEFAULT,
    KERAS_FEW_OURS,
    POOL,
    POOL_FREQ,
    SCALE_TFT,
    TFDATA,
    TFDATA_ONE,
    TRANSFORM_TFT,
)
from benchmarks.options import FLAGS
from benchmarks.targets import targets

__all__ = ["report"]


def report(rows: list[dict], spark: bool) -> None:
    """Prints every table and the targets; exits if results disagree."""
    report_layouts([r for r in rows if r["part"] == "layouts"])
    others = ("examples", "record", "layouts", "transform", "transform_small", "transform_wide", "transform_keras")
    others += ("transform_scale",)
    words = [r for r in rows if r["part"] not in others]
    if words:
        report_words(words)
    failures = report_examples([r for r in rows if r["part"] == "examples"], "examples", TFDATA)
    failures += report_examples([r for r in rows if r["part"] == "record"], "record", TFDATA_ONE)
    failures += report_transform([r for r in rows if r["part"] == "transform"])
    failures += report_small_transform([r for r in rows if r["part"] == "transform_small"])
    failures += report_wide_transform([r for r in rows if r["part"] == "transform_wide"])
    failures += report_keras_transform([r for r in rows if r["part"] == "transform_keras"])
    failures += report_scale_transform([r for r in rows if r["part"] == "transform_scale"])
    if not spark:
        print("\n(pyspark local[2] not run: pyspark or java is not installed)")
    targets(rows)
    if FLAGS.json:
        with open(FLAGS.json, "w") as f:
            json.dump(rows, f, indent=1)
    if failures:
        sys.exit("RESULTS DISAGREE:\n" + "\n".join(failures))


def _wall(r: dict) -> str:
    return "%.2f (%.2f-%.2f)" % (r["seconds"], r["low"], r["high"])


def _rss(r: dict) -> str:
    return ", ".join("%s %.0f" % (role, mb) for role, mb in sorted(r["rss"].items()))


def _seconds(value: float | None) -> str:
    return "%.2f" % value if value else ""


def _word_failures(part: str, group: list[dict]) -> list[str]:
    """A word part's disagreements: every count must find the same words, every frequency
    run the same words and frequencies."""
    failures = []
    for kind in ("words", "freq"):
        results = {
            json.dumps({k: v for k, v in r["result"].items() if k != "words" or kind == "words"}, sort_keys=True)
            for r in group
            if r["run"].startswith("freq:") == (kind == "freq")
        }
        words = {r["result"]["words"] for r in group if r["run"].startswith("freq:") == (kind == "freq")}
        if len(words) > 1 or (kind == "freq" and len(results) > 1):
            failures.append("%s %s: results disagree: %s" % (part, kind, sorted(results)))
    return failures


def _word_line(part: str, r: dict, wc: dict | None, peer: dict | None) -> str:
    """One row of the word table, its ratios against `wc` -w and its Pool(2) `peer`."""
    result = "%d words" % r["result"]["words"] + (
        ", %d distinct" % r["result"]["distinct"] if "distinct" in r["result"] else ""
    )
    cells = (
        part,
        r["run"],
        _wall(r),
        "%.0f" % (r["mb"] / r["seconds"]),
        "%.2fx" % (wc["seconds"] / r["seconds"]) if wc else "",
        "%.2fx" % (r["seconds"] / peer["seconds"]) if peer else "",
        _seconds(r["startup"]),
        _seconds(r["steady"]),
        "%.0f" % (r["mb"] / r["steady"]) if r["steady"] else "",
        _rss(r),
        result,
    )
    return "| " + " | ".join(cells) + " |"


def report_words(rows: list[dict]) -> None:
    """The table of the word parts; exits if their results disagree."""
    print()
    print(
        "| part | run | wall s, median (min-max) | MB/s | wc -w / run | run / Pool(2) | start-up s | map s "
        "| map MB/s | peak RSS MB | result |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    failures = []
    for part in dict.fromkeys(r["part"] for r in rows):
        group = [r for r in rows if r["part"] == part]
        wc = next((r for r in group if r["run"] == "wc -w"), None)  # none in "storage"
        pool = {
            kind: next((r for r in group if r["run"] == name), None)
            for kind, name in (("words", POOL), ("freq", POOL_FREQ))
        }
        failures += _word_failures(part, group)
        for r in group:
            print(_word_line(part, r, wc, pool["freq" if r["run"].startswith("freq:") else "words"]))
    if failures:
        sys.exit("RESULTS DISAGREE:\n" + "\n".join(failures))


def report_layouts(rows: list[dict]) -> None:
    """The listing layouts' table: start-up (listing included) and peak RSS per role."""
    if not rows:
        return
    print("\n| layout | wall s, median (min-max) | start-up s | map s | peak RSS MB | files |")
    print("|---|---:|---:|---:|---|---:|")
    for r in rows:
        cells = (r["run"], _wall(r), _seconds(r["startup"]), _seconds(r["steady"]), _rss(r))
        print("| %s | %s | %s | %s | %s | %s |" % (*cells, r["result"].get("files", "")))


def report_transform(rows: list[dict]) -> list[str]:
    """The transform part's table, against tf.Transform's side; returns its disagreements
    (both must write every example)."""
    if not rows:
        return []
    print("\n| part | run | wall s, median (min-max) | MB/s | run / tf.Transform | peak RSS MB | result |")
    print("|---|---|---:|---:|---:|---|---|")
    theirs = next(r for r in rows if r["run"] == TRANSFORM_TFT)
    for r in rows:
        mb_s, ratio = r["mb"] / r["seconds"], r["seconds"] / theirs["seconds"]
        print(
            "| transform | %s | %s | %.0f | %.2fx | %s | %d examples written |"
            % (r["run"], _wall(r), mb_s, ratio, _rss(r), r["result"]["examples"])
        )
    if len({r["result"]["examples"] for r in rows}) > 1:
        return ["transform: the sides wrote different numbers of examples"]
    return []


def report_small_transform(rows: list[dict]) -> list[str]:
    """The small transform part's table, end to end, against TensorFlow's import alone;
    returns its disagreement (the transform must write every example of the part)."""
    if not rows:
        return []
    print("\n| part | run | wall s, median (min-max) | peak RSS MB | result |")
    print("|---|---|---:|---|---|")
    for r in rows:
        result = "%d examples written" % r["result"]["examples"] if "examples" in r["result"] else ""
        print("| transform_small | %s | %s | %s | %s |" % (r["run"], _wall(r), _rss(r), result))
    written = [r["result"]["examples"] for r in rows if "examples" in r["result"]]
    if written != [SMALL_EXAMPLES]:
        return ["transform_small: %s examples written, not %d" % (written, SMALL_EXAMPLES)]
    return []


def report_wide_transform(rows: list[dict]) -> list[str]:
    """The wide vocabulary part's table: the transform pass (as the command prints it) and
    the whole command; returns its disagreement (every example must be written, by each)."""
    if not rows:
        return []
    print("\n| part | run | transform pass s, median | wall s, median (min-max) | peak RSS MB | result |")
    print("|---|---|---:|---:|---|---|")
    for r in rows:
        result = "%d examples written" % r["result"]["examples"]
        steady = "%.2f" % r["steady"] if r["steady"] else "not printed"
        print("| transform_wide | %s | %s | %s | %s | %s |" % (r["run"], steady, _wall(r), _rss(r), result))
    written = [r["result"]["examples"] for r in rows]
    if written != [WIDE_EXAMPLES] * len(rows) or not all(r["steady"] for r in rows):
        return [
            "transform_wide: %s examples written, not %d each, or a pass time not printed" % (written, WIDE_EXAMPLES)
        ]
    return []


def report_keras_transform(rows: list[dict]) -> list[str]:
    """The Keras part's table: ours whole against Keras's adapt alone, at each size; returns
    its disagreements (at each size, ours writes every example Keras reads)."""
    if not rows:
        return []
    by = {r["run"]: r for r in rows}
    print("\n| part | run | examples | wall s, median (min-max) | run / Keras adapt | peak RSS MB |")
    print("|---|---|---:|---:|---:|---|")
    failures = []
    sizes = ((KERAS_FEW_OURS, KERAS_FEW_DEFAULT, KERAS_FEW), (KERAS_ALL_OURS, KERAS_ALL_DEFAULT, KERAS_ALL))
    for *ours, keras in sizes:
        for r in [by[name] for name in ours] + [by[keras]]:
            ratio = r["seconds"] / by[keras]["seconds"]
            print(
                "| transform_keras | %s | %d | %s | %.2fx | %s |"
                % (r["run"], r["result"]["examples"], _wall(r), ratio, _rss(r))
            )
        for name in ours:
            if by[name]["result"]["examples"] != by[keras]["result"]["examples"]:
                failures.append("transform_keras: %s wrote other examples than Keras read" % name)
    return failures


def report_scale_transform(rows: list[dict]) -> list[str]:
    """The scale part's table: each size's whole command, its transform pass, every task's
    peak and what the oracle found; returns its disagreement (ours must be exact)."""
    if not rows:
        return []
    print(
        "\n| part | run | examples | wall s, median (min-max) | transform pass s | peak RSS MB | against the oracle |"
    )
    print("|---|---|---:|---:|---:|---|---|")
    for r in rows:
        result = r["result"]
        found = "exact" if result["exact"] else "; ".join(result["problems"])
        steady = "%.2f" % r["steady"] if r["steady"] else ""
        print(
            "| transform_scale | %s | %d | %s | %s | %s | %s |"
            % (r["run"], result["examples"], _wall(r), steady, _rss(r), found)
        )
    wrong = [r["run"] for r in rows if r["run"] != SCALE_TFT and not r["result"]["exact"]]
    return ["transform_scale: not the oracle's: %s" % ", ".join(wrong)] if wrong else []


def report_examples(rows: list[dict], part: str, plain_name: str) -> list[str]:
    """A tf.Example part's table, against its plain tf.data pass `plain_name`; returns its
    disagreements (every run must read the same examples and values, and ours must have
    Pool(2)'s exact counts)."""
    if not rows:
        return []
    print()
    print(
        "| part | run | wall s, median (min-max) | MB/s | run / tf.data pass | start-up s | map s | peak RSS MB | result |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|---|")
    plain = next(r for r in rows if r["run"] == plain_name)
    for r in rows:
        result = "%d examples, %d values" % (r["result"]["examples"], r["result"]["values"])
        result += ", %d distinct" % r["result"]["distinct"] if "distinct" in r["result"] else ""
        mb_s, ratio = "%.0f" % (r["mb"] / r["seconds"]), "%.2fx" % (r["seconds"] / plain["seconds"])
        cells = (part, r["run"], _wall(r), mb_s, ratio, _seconds(r["startup"]), _seconds(r["steady"]), _rss(r), result)
        print("| " + " | ".join(cells) + " |")
    failures = []
    if len({(r["result"]["examples"], r["result"]["values"]) for r in rows}) > 1:
        failures.append("%s: runs read different examples or values: %s" % (part, [r["result"] for r in rows]))
    vocabularies = {r["result"]["digest"] for r in rows if "digest" in r["result"]}
    if len(vocabularies) > 1:
        failures.append("%s: vocabularies disagree" % part)
    return failures
