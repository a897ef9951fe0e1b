"""Dataset statistics for scripts and people: a JSON document of every figure, and the
console's table, a line per feature."""

from tf2_mapreduce.outputs.files import escape

__all__ = ["to_json", "table_lines"]


def _histogram(buckets):
    return [{"low": low, "high": high, "count": count} for low, high, count in buckets]


def _figures(numbers):
    return {
        name: getattr(numbers, name)
        for name in ("count", "quantile_error", "mean", "std_dev", "num_zeros", "min", "median", "max", "quantiles")
    } | {
        "histogram": _histogram(numbers.histogram),
        "quantiles_histogram": _histogram(numbers.quantiles_histogram),
        "num_nan": numbers.num_nan,
        "num_pos_inf": numbers.num_pos_inf,
        "num_neg_inf": numbers.num_neg_inf,
    }


def _words(strings):
    return {
        "count": strings.count,
        "unique": strings.unique,
        "invalid_utf8_count": strings.invalid_utf8_count,
        "avg_length": strings.avg_length,
        "top_values": [[escape(value), count] for value, count in strings.top_values],
        "rank_histogram": [[rank, escape(value), count] for rank, value, count in strings.rank_histogram],
    }


def to_json(stats) -> dict:
    """`stats` as JSON-ready values: bytes escaped as `escape` does (infinities stay floats,
    which Python's json writes as Infinity)."""
    features = {}
    for name, f in stats.features.items():
        features[name] = {
            "type": f.type,
            "num_present": f.num_present,
            "num_missing": f.num_missing,
            "num_unset": f.num_unset,
            "min_num_values": f.min_num_values,
            "max_num_values": f.max_num_values,
            "avg_num_values": f.avg_num_values,
            "tot_num_values": f.tot_num_values,
            "num_values_quantiles": f.num_values_quantiles,
            "num_values_histogram": _histogram(f.num_values_histogram),
            "numeric": _figures(f.numeric) if f.numeric else None,
            "string": _words(f.string) if f.string else None,
            "left_out": f.left_out,
        }
    return {"num_examples": stats.num_examples, "features": features}


def _number(value):
    return "-" if value is None else "%.6g" % value


def table_lines(stats) -> list:
    """The console's table: a line per feature."""
    lines = ["%-24s %-6s %9s %9s %8s  %s" % ("feature", "type", "present", "missing", "values", "figures")]
    for name, f in stats.features.items():
        if f.numeric is not None:
            n = f.numeric
            figures = "mean %s sd %s min %s median %s max %s" % tuple(
                _number(v) for v in (n.mean, n.std_dev, n.min, n.median, n.max)
            )
            extra = [("NaN", n.num_nan), ("+inf", n.num_pos_inf), ("-inf", n.num_neg_inf), ("zeros", n.num_zeros)]
            figures += "".join(", %d %s" % (count, what) for what, count in extra if count)
        elif f.string is not None:
            top = f.string.top_values[0] if f.string.top_values else None
            figures = "%d unique, avg length %.1f" % (f.string.unique, f.string.avg_length)
            if top:
                figures += ", top %s (%d)" % (escape(top[0]), top[1])
        else:
            figures = "no values"
        if f.left_out:
            figures += "; left out: " + ", ".join("%d examples of %s" % (n, t) for t, n in f.left_out.items())
        lines.append(
            "%-24s %-6s %9d %9d %8.3g  %s"
            % (name, f.type or "-", f.num_present, f.num_missing, f.avg_num_values, figures)
        )
    return lines
