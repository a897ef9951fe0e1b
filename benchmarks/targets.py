"""The performance targets (docs/performance.md), each measured in this run's rows and
printed as met, not met, or reported only."""

from benchmarks.names import (
    DEFAULT,
    DEFAULT_FREQ,
    FIND_CAT,
    KERAS_ALL,
    KERAS_ALL_DEFAULT,
    KERAS_ALL_OURS,
    KERAS_FEW,
    KERAS_FEW_DEFAULT,
    KERAS_FEW_OURS,
    POOL,
    POOL_FREQ,
    SCALE_ONCE,
    SCALE_TWICE,
    SCALE_WIDE_TERMS,
    STATS,
    STATS_ALL,
    STATS_ALL_TASKS,
    STORAGE_503,
    STORAGE_GCS,
    STORAGE_LOCAL,
    TF_IMPORT,
    TFDATA,
    TFDATA_ONE,
    TRANSFORM_NARROW,
    TRANSFORM_OURS,
    TRANSFORM_SMALL,
    TRANSFORM_TFT,
    TRANSFORM_WIDE,
    VOCAB,
    VOCAB_ONE_WORKER,
    VOCAB_TASKS,
    VOCAB_TWO_WORKERS,
)

__all__ = ["Check", "targets"]

Check = tuple[str, str, bool | None]  # target, measured, met (None: reported, not a target)
Rows = dict[tuple[str, str], dict]  # rows by (part, run)


def _ratio(by: Rows, part: str, name: str, peer: str, goal: float, what: str | None = None) -> list[Check]:
    """`name`'s wall time over `peer`'s, at most `goal`; none where either did not run."""
    if (part, name) not in by or (part, peer) not in by:
        return []
    value = by[part, name]["seconds"] / by[part, peer]["seconds"]
    return [("%s: %s <= %.1fx %s" % (part, what or name, goal, peer), "%.2fx" % value, value <= goal)]


def _map_rate(by: Rows, part: str) -> float | None:
    """The default command's MB/s in its map phase on `part`, where it ran."""
    r = by.get((part, DEFAULT))
    return r["mb"] / r["steady"] if r and r["steady"] else None


def _words(by: Rows) -> list[Check]:
    checks = _ratio(by, "small", DEFAULT, POOL, 1.0, "default command, end to end")
    if ("small", DEFAULT) in by and ("small", POOL) in by:
        ours, pool = by["small", DEFAULT], by["small", POOL]
        after_startup = ours["mb"] / (ours["seconds"] - ours["startup"])
        value = after_startup / (pool["mb"] / pool["seconds"])
        checks.append(("small: first map step to result >= 3x Pool(2)'s throughput", "%.2fx" % value, value >= 3))
    for part in ("tiny", "huge", "giant"):
        checks += _ratio(by, part, DEFAULT, POOL, 0.7, "default command")
    checks += _ratio(by, "tiny", DEFAULT, FIND_CAT, 1.5, "default command")
    checks += _ratio(by, "giant", DEFAULT, "wc -w", 0.5, "default command")
    huge, giant = _map_rate(by, "huge"), _map_rate(by, "giant")
    if huge:
        checks.append(("huge: map phase >= 1000 MB/s", "%.0f MB/s" % huge, huge >= 1000))
    if huge and giant:
        checks.append(("giant: map MB/s within 15% of huge's (linear)", "%.0f MB/s" % giant, giant >= 0.85 * huge))
    for part in ("small", "huge"):
        checks += _ratio(by, part, DEFAULT_FREQ, POOL_FREQ, 0.6, "wordfreq, default command")
        if (part, DEFAULT_FREQ) in by:
            peak = max(by[part, DEFAULT_FREQ]["rss"].values())
            checks.append(("%s: wordfreq, every process < 1000 MB peak RSS" % part, "%.0f MB" % peak, peak < 1000))
    return checks


def _task_peaks(by: Rows) -> list[Check]:
    """Stats of every feature against vocab, per task: each role's peak against the same role's."""
    if ("examples", STATS_ALL_TASKS) not in by or ("examples", VOCAB_TASKS) not in by:
        return []
    ours, theirs = by["examples", STATS_ALL_TASKS]["rss"], by["examples", VOCAB_TASKS]["rss"]
    checks = []
    for role in ("ps", "worker", "main"):
        name = "coordinator" if role == "main" else role
        checks.append(
            (
                "examples: stats of every feature, %s peak RSS <= vocab's %s x1.3" % (name, name),
                "%.0f / %.0f MB" % (ours[role], theirs[role]),
                ours[role] <= 1.3 * theirs[role],
            )
        )
    return checks


def _examples(by: Rows) -> list[Check]:
    checks = _ratio(by, "examples", VOCAB, TFDATA, 1.5, "vocab of 3 features, default command, end to end")
    checks += _ratio(by, "examples", STATS, VOCAB, 1.3, "stats of the same 3 features, end to end")
    checks += _ratio(by, "examples", STATS_ALL, VOCAB, 1.3, "stats of every feature, end to end")
    checks += _task_peaks(by)
    if ("examples", STATS_ALL) in by and ("examples", VOCAB) in by:
        # Every task in one process, as the default command runs them: reported, not a
        # target (a task's own peak is; the in-process sum adds the workers' and the ps's).
        peaks = [max(by["examples", run]["rss"].values()) for run in (STATS_ALL, VOCAB)]
        what = "examples: stats of every feature in one process, peak RSS (vocab's: %.0f MB)" % peaks[1]
        checks.append((what, "%.0f MB" % peaks[0], None))
    if ("examples", VOCAB) in by and ("examples", TFDATA) in by:
        ours, plain = by["examples", VOCAB], by["examples", TFDATA]
        value = ours["steady"] / plain["steady"]
        checks.append(("examples: vocab's map phase <= 1.5x one tf.data pass per core", "%.2fx" % value, value <= 1.5))
    if ("record", VOCAB_ONE_WORKER) in by and ("record", VOCAB_TWO_WORKERS) in by:
        value = by["record", VOCAB_ONE_WORKER]["seconds"] / by["record", VOCAB_TWO_WORKERS]["seconds"]
        checks.append(("record: one TFRecord file, vocab on 2 workers >= 1.7x 1 worker", "%.2fx" % value, value >= 1.7))
    checks += _ratio(by, "record", VOCAB_TWO_WORKERS, TFDATA_ONE, 1.0, "vocab on 2 workers, end to end")
    return checks


def _layouts(by: Rows, rows: list[dict]) -> list[Check]:
    if ("layouts", TF_IMPORT) not in by:
        return []
    tf_import = by["layouts", TF_IMPORT]["seconds"]
    checks = []
    for r in rows:
        if r["part"] == "layouts" and r["run"] != TF_IMPORT:
            checks.append(
                (
                    "%s: start-up <= TF import (%.1f s) + 2 s" % (r["run"], tf_import),
                    "%.2f s" % r["startup"],
                    r["startup"] <= tf_import + 2,
                )
            )
            peak = r["rss"].get("main", 0)
            checks.append(("%s: coordinator peak RSS < 1500 MB" % r["run"], "%.0f MB" % peak, peak < 1500))
    return checks


def _others(by: Rows) -> list[Check]:
    """The transform and storage parts' ratios, and the tiny files' coordinator peak."""
    what = "analyze + materialize, against tf.Transform's DirectRunner"
    checks = _ratio(by, "transform", TRANSFORM_OURS, TRANSFORM_TFT, 0.3, what)
    for ours, keras in ((KERAS_FEW_DEFAULT, KERAS_FEW), (KERAS_ALL_DEFAULT, KERAS_ALL)):
        checks += _ratio(by, "transform_keras", ours, keras, 0.5)
    for ours, keras in ((KERAS_FEW_OURS, KERAS_FEW), (KERAS_ALL_OURS, KERAS_ALL)):  # reported, not a target
        checks += [(name, measured, None) for name, measured, _ in _ratio(by, "transform_keras", ours, keras, 0.5)]
    checks += _ratio(by, "storage", STORAGE_GCS, STORAGE_LOCAL, 1.5, "the same 40 files on gs://, end to end")
    checks += _ratio(by, "storage", STORAGE_503, STORAGE_GCS, 1.3, "with 5% of reads answered 503")
    if ("transform_small", TRANSFORM_SMALL) in by and ("transform_small", TF_IMPORT) in by:
        ours, tf_import = by["transform_small", TRANSFORM_SMALL]["seconds"], by["transform_small", TF_IMPORT]["seconds"]
        checks.append(
            (
                "transform_small: 20,000 examples end to end <= TF import (%.1f s) + 3 s" % tf_import,
                "%.2f s" % ours,
                ours <= tf_import + 3,
            )
        )
    if ("transform_wide", TRANSFORM_WIDE) in by and ("transform_wide", TRANSFORM_NARROW) in by:
        wide, narrow = by["transform_wide", TRANSFORM_WIDE]["steady"], by["transform_wide", TRANSFORM_NARROW]["steady"]
        if wide and narrow:
            checks.append(
                (
                    "transform_wide: the pass with 1,000,000 terms <= 1.5x with 1,000 (%.2f s)" % narrow,
                    "%.2f s, %.2fx" % (wide, wide / narrow),
                    wide <= 1.5 * narrow,
                )
            )
    if ("transform_scale", SCALE_ONCE) in by and ("transform_scale", SCALE_TWICE) in by:
        once, twice = by["transform_scale", SCALE_ONCE], by["transform_scale", SCALE_TWICE]
        checks.append(
            (
                "transform_scale: twice the examples <= 2.1x the time (%.0f s)" % once["seconds"],
                "%.0f s, %.2fx" % (twice["seconds"], twice["seconds"] / once["seconds"]),
                twice["seconds"] <= 2.1 * once["seconds"],
            )
        )
        peak = max(once["rss"].get("main", 0), twice["rss"].get("main", 0))  # the coordinator
        checks.append(("transform_scale: coordinator peak RSS < 1000 MB", "%.0f MB" % peak, peak < 1000))
    if ("transform_scale", SCALE_WIDE_TERMS) in by:
        wide = by["transform_scale", SCALE_WIDE_TERMS]["result"]
        checks.append(
            (
                "transform_scale: a whole vocabulary over 2 GiB applied exactly",
                "%d bytes, %s" % (wide["vocabulary_bytes"], "exact" if wide["exact"] else "not exact"),
                wide["exact"] and wide["vocabulary_bytes"] > 2**31,
            )
        )
    if ("tiny", DEFAULT) in by:
        peak = by["tiny", DEFAULT]["rss"].get("main", 0)  # the coordinator: the command itself
        checks.append(("tiny: coordinator peak RSS (1M files: < 1500 MB)", "%.0f MB" % peak, None))
    return checks


def targets(rows: list[dict]) -> list[Check]:
    """The performance targets, measured in this run: (target, measured, met), printed."""
    by = {(r["part"], r["run"]): r for r in rows}
    checks = _words(by) + _examples(by) + _layouts(by, rows) + _others(by)
    print("\ntargets (measured in this run):")
    for name, measured, met in checks:
        print("  %-66s %10s  %s" % (name, measured, {True: "met", False: "NOT met", None: ""}[met]))
    return checks
