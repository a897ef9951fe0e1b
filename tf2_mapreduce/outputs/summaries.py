"""TensorBoard summaries of a running job (`--logdir`): throughput, files and bytes
done, the job's running totals, map steps per worker and re-run rounds, written at
every progress report so that a long cluster job can be watched as it runs.
"""

import tensorflow as tf

from tf2_mapreduce.outputs import words

__all__ = ["Summaries"]

# What tf.summary.scalar writes, without needing the tensorboard package to write it.
SCALAR = tf.compat.v1.SummaryMetadata(plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars"))


class Summaries:
    """Writes one set of scalars per `Progress`; the step is milliseconds since
    the run started. Blocking, local: the event file is written by the coordinator."""

    def __init__(self, logdir, reducer):
        self._writer = tf.summary.create_file_writer(logdir)
        self._reducer = reducer  # whose value `words` names
        self._last = None  # the previous Progress, for rates over the last interval

    def write(self, p):
        values = {
            "progress/files_done": p.files_done,
            "progress/files_fraction": p.files_done / p.files_total if p.files_total else 1.0,
            "progress/bytes_done": p.bytes_done,
            "progress/files_skipped": p.files_skipped,
            "retries/rounds_rerun": p.rounds_rerun,
        }
        totals = self._totals(p)
        values.update(("totals/%s" % name, value) for name, value in totals.items())
        if p.distinct is not None:
            values["totals/distinct_keys"] = p.distinct
        for index, steps in enumerate(p.steps_per_worker):
            values["workers/map_steps/worker_%d" % index] = steps
        if self._last is not None and p.seconds > self._last.seconds:
            interval = p.seconds - self._last.seconds
            values["throughput/bytes_per_second"] = (p.bytes_done - self._last.bytes_done) / interval
            for name, rate in words.rates(self._reducer, self._last.value, p.value, interval).items():
                values["throughput/%s_per_second" % name] = rate
        self._last = p
        step = int(p.seconds * 1000)
        with self._writer.as_default():
            for tag, value in values.items():
                tf.summary.write(tag, tf.constant(value, tf.float32), step=step, metadata=SCALAR)
        self._writer.flush()

    def _totals(self, p):
        return {name: value for name, value in words.fields(self._reducer, p.value).items() if value is not None}

    def close(self):
        self._writer.close()
