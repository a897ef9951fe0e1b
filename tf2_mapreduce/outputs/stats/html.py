"""Dataset statistics as one self-contained web page: no script, no network, a chart per
feature drawn as inline SVG, the features that need a look flagged at the top."""

import html

from tf2_mapreduce.outputs import files as output

__all__ = ["page", "flags"]

_WIDTH, _HEIGHT = 360, 120
_STYLE = (
    "body{font:14px sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
    "td,th{padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
    ".feature{border-top:1px solid #ccc;padding:1em 0;display:flex;gap:2em}"
    ".flag{color:#a40}rect{fill:#4a7bb7}text{font:10px sans-serif;fill:#222}"
)


def flags(feature) -> list:
    """What to look at in a feature (`statistics.FeatureStats`): missing values, NaNs,
    a single value, values of another type left out."""
    found = []
    if feature.num_missing:
        found.append("missing in %d examples" % feature.num_missing)
    numbers, strings = feature.numeric, feature.string
    if numbers is not None and numbers.num_nan:
        found.append("%d NaN" % numbers.num_nan)
    if (numbers is not None and numbers.min is not None and numbers.min == numbers.max) or (
        strings is not None and strings.unique == 1
    ):
        found.append("a single value")
    if feature.type is None:
        found.append("no values")
    for kind, examples in feature.left_out.items():
        found.append("%d examples of %s left out" % (examples, kind))
    return found


def _bars(titles, counts, left, right):
    """An SVG bar chart of `counts`, a bar each with its title (shown on hover), `left`
    and `right` written under its two ends."""
    if not counts:
        return ""
    top = max(counts) or 1
    width = _WIDTH / len(counts)
    parts = ['<svg width="%d" height="%d" role="img">' % (_WIDTH, _HEIGHT + 30)]
    for k, (title, count) in enumerate(zip(titles, counts)):
        height = _HEIGHT * count / top
        parts.append(
            '<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %d</title></rect>'
            % (k * width + 1, _HEIGHT - height, max(width - 2, 1), height, html.escape(title), count)
        )
    # Ends anchored inside the chart: a long label is not cut off at its edge.
    parts.append('<text x="1" y="%d">%s</text>' % (_HEIGHT + 14, html.escape(left[:24])))
    parts.append(
        '<text x="%d" y="%d" text-anchor="end">%s</text>' % (_WIDTH - 1, _HEIGHT + 14, html.escape(right[:24]))
    )
    parts.append("</svg>")
    return "".join(parts)


def _numbers_table(rows):
    return "<table>%s</table>" % "".join(
        "<tr><td>%s</td><td>%s</td></tr>" % (html.escape(name), html.escape(str(value))) for name, value in rows
    )


def _feature(f):
    rows = [
        ("type", f.type or "-"),
        ("present", f.num_present),
        ("missing", f.num_missing),
        ("values per example", "%d to %d, mean %.4g" % (f.min_num_values, f.max_num_values, f.avg_num_values)),
    ]
    chart = ""
    if f.numeric is not None:
        n = f.numeric
        rows += [(name, getattr(n, name)) for name in ("count", "mean", "std_dev", "num_zeros", "min", "median", "max")]
        rows += [("NaN", n.num_nan), ("+inf", n.num_pos_inf), ("-inf", n.num_neg_inf)]
        if n.histogram:
            chart = _bars(
                ["%.4g to %.4g" % (low, high) for low, high, _ in n.histogram],
                [count for _, _, count in n.histogram],
                "%.4g" % n.histogram[0][0],
                "%.4g" % n.histogram[-1][1],
            )
    elif f.string is not None:
        s = f.string
        rows += [("unique", s.unique), ("average length", "%.4g bytes" % s.avg_length)]
        top = s.top_values[:10]
        values = [output.escape(value) for value, _ in top]
        chart = _bars(values, [count for _, count in top], values[0] if values else "", values[-1] if values else "")
        rows += [("top: " + output.escape(value), count) for value, count in top]
    warning = "".join('<div class="flag">%s</div>' % html.escape(text) for text in flags(f))
    return '<div class="feature" id="f-%s"><div><h3>%s</h3>%s%s</div><div>%s</div></div>' % (
        html.escape(f.name, quote=True),
        html.escape(f.name),
        warning,
        _numbers_table(rows),
        chart,
    )


def page(stats, title="Dataset statistics") -> str:
    """`stats` (`statistics.DatasetStats`) as an HTML page."""
    flagged = [(f, flags(f)) for f in stats.features.values()]
    summary = "".join(
        '<li><a href="#f-%s">%s</a>: %s</li>'
        % (html.escape(f.name, quote=True), html.escape(f.name), html.escape("; ".join(why)))
        for f, why in flagged
        if why
    )
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>%s</title><style>%s</style></head><body>'
        "<h1>%s</h1><p>%d examples, %d features</p><h2>To look at</h2><ul>%s</ul>%s</body></html>\n"
        % (
            html.escape(title),
            _STYLE,
            html.escape(title),
            stats.num_examples,
            len(stats.features),
            summary or "<li>nothing: every feature is in every example, without NaN</li>",
            "".join(_feature(f) for f in stats.features.values()),
        )
    )
