"""Our stats.pb against TFDV's own statistics of the same TFRecord files, figure by figure.

    # TFDV 1.16.1 in a venv of its own, as `python3 scripts/install_peers.py` makes it
    .venv-peers/tfdv/bin/python scripts/compare_tfdv.py --stats stats/stats.pb [--report R.json] 'shards/*.tfrecord*'

Loads our file with `tfdv.load_stats_binary`, infers a schema from it and renders TFDV's
page from it (`tfdv.infer_schema`, `tfdv.get_statistics_html`: both must take it), runs
`tfdv.generate_statistics_from_tfrecord` over the same files, and compares what both
compute exactly (counts, types, min, max, zeros, distinct and top values) for equality,
and mean and deviation within 1e-9 relative (TFDV adds float64 in Beam's order). TFDV's
median, quantiles and histograms come from a sketch: printed, not compared. Exit status
1 if a figure differs; --report writes what was found as JSON (tests/compat runs it so, in
CI).
"""

import json
import math
import sys

from absl import app, flags

FLAGS = flags.FLAGS


def define_flags():
    """The script's flags: defined when it runs, not when it is imported."""
    flags.DEFINE_string("stats", None, "Our stats.pb.", required=True)
    flags.DEFINE_string("report", None, "Where to write the findings as JSON.")


def _by_path(dataset):
    return {tuple(f.path.step): f for f in dataset.features}


def _common(feature):
    stats = feature.num_stats if feature.HasField("num_stats") else feature.string_stats
    return stats.common_stats


def compare(ours, theirs):
    """[(feature, figure, ours, theirs)] of the figures that differ."""
    wrong = []
    if ours.num_examples != theirs.num_examples:
        wrong.append(("*", "num_examples", ours.num_examples, theirs.num_examples))
    mine, other = _by_path(ours), _by_path(theirs)
    for path in sorted(set(mine) | set(other)):
        name = "/".join(path)
        if path not in mine or path not in other:
            wrong.append((name, "present", path in mine, path in other))
            continue
        a, b = mine[path], other[path]
        if a.type != b.type:
            wrong.append((name, "type", a.type, b.type))
        ca, cb = _common(a), _common(b)
        for figure in ("num_non_missing", "num_missing", "min_num_values", "max_num_values", "tot_num_values"):
            if getattr(ca, figure) != getattr(cb, figure):
                wrong.append((name, figure, getattr(ca, figure), getattr(cb, figure)))
        if a.HasField("num_stats") and b.HasField("num_stats"):
            na, nb = a.num_stats, b.num_stats
            for figure in ("min", "max", "num_zeros"):
                if getattr(na, figure) != getattr(nb, figure):
                    wrong.append((name, figure, getattr(na, figure), getattr(nb, figure)))
            for figure in ("mean", "std_dev"):
                x, y = getattr(na, figure), getattr(nb, figure)
                if not (x == y or (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-9)):
                    wrong.append((name, figure, x, y))
            nan = [[h.num_nan for h in n.histograms] for n in (na, nb)]
            if nan[0] != nan[1]:
                wrong.append((name, "num_nan", nan[0], nan[1]))
            print("%s: median %r (TFDV's sketch: %r)" % (name, na.median, nb.median))
        elif a.HasField("string_stats") and b.HasField("string_stats"):
            sa, sb = a.string_stats, b.string_stats
            for figure in ("unique", "avg_length", "invalid_utf8_count"):
                if not math.isclose(getattr(sa, figure), getattr(sb, figure), rel_tol=1e-6):
                    wrong.append((name, figure, getattr(sa, figure), getattr(sb, figure)))
            tops = [[(t.value, t.frequency) for t in s.top_values] for s in (sa, sb)]
            if tops[0] != tops[1]:
                wrong.append((name, "top_values", tops[0][:5], tops[1][:5]))
            ranks = [[(r.label, r.sample_count) for r in s.rank_histogram.buckets] for s in (sa, sb)]
            if ranks[0] != ranks[1]:
                wrong.append((name, "rank_histogram", ranks[0][:5], ranks[1][:5]))
        elif a.WhichOneof("stats") != b.WhichOneof("stats"):
            wrong.append((name, "stats", a.WhichOneof("stats"), b.WhichOneof("stats")))
    return wrong


def main(argv):
    import tensorflow_data_validation as tfdv

    if len(argv) != 2:
        raise app.UsageError("give one file pattern, the inputs of our stats.pb")
    ours = tfdv.load_stats_binary(FLAGS.stats)
    schema = tfdv.infer_schema(ours)
    print("infer_schema: %d features" % len(schema.feature))
    page = tfdv.get_statistics_html(ours)
    print("get_statistics_html: %d characters" % len(page))
    theirs = tfdv.generate_statistics_from_tfrecord(data_location=argv[1], stats_options=tfdv.StatsOptions())
    wrong = compare(ours.datasets[0], theirs.datasets[0])
    for name, figure, mine, other in wrong:
        print("DIFFERS %s %s: ours %r, TFDV %r" % (name, figure, mine, other))
    print("%d figure(s) differ over %d features" % (len(wrong), len(ours.datasets[0].features)))
    if FLAGS.report:
        report = {
            "num_examples": {"ours": ours.datasets[0].num_examples, "tfdv": theirs.datasets[0].num_examples},
            "features": {
                side: sorted("/".join(f.path.step) for f in stats.datasets[0].features)
                for side, stats in (("ours", ours), ("tfdv", theirs))
            },
            "schema_features": sorted(f.name for f in schema.feature),
            "html_chars": len(page),
            "differences": [list(row) for row in wrong],
        }
        with open(FLAGS.report, "w") as f:
            json.dump(report, f, default=repr)
    return 1 if wrong else 0


if __name__ == "__main__":
    define_flags()
    sys.exit(app.run(main))
