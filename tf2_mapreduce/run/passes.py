"""Jobs of several passes over the same inputs, each a `Job` whose `Result` may decide the
next; run by the client and the CLI as a prepared plain job is, through one `run`."""

import importlib
from dataclasses import dataclass, field
from typing import ClassVar

from tf2_mapreduce.inputs.files import Inputs

__all__ = ["Passes", "PreparedPasses"]


class Passes:
    """A job of several passes over the same inputs, declared: a subclass gives `name`,
    `check()` (what can be checked before any pass, TensorFlow imported) and `RUNNER`, the
    module that runs it, as a job's runner is apart from it: its `run(job, run_pass, found,
    claimed=None, **options)` runs each pass, a `Job`, to its `Result` by `run_pass(job,
    pass_options)` (`options` and the pass's own: its checkpoint directory), and returns
    the last pass's `Result`, its `written` what the passes wrote into `output_dir`."""

    COMMAND: ClassVar[str] = ""  # its --job name, for a built-in one
    RUNNER: ClassVar[str] = ""
    name = ""

    def check(self) -> None:
        pass


@dataclass
class PreparedPasses:
    """A `Passes` job over the inputs `found` (listed once, for every pass) and `options`:
    what `Cluster.prepare` makes of one, as `run.runner.Prepared` of a plain job."""

    job: Passes
    found: Inputs
    options: dict = field(default_factory=dict)

    def run(self, prepare, run_pass, claimed=None):
        """Runs every pass: each `Job` made a `Prepared` by `prepare(job, pass_options)` and
        run to its `Result` by `run_pass(prepared)`. `claimed`: the output directory's
        `ResultDirectory`, claimed already. Blocking."""
        runner = importlib.import_module(self.job.RUNNER)
        return runner.run(
            self.job, lambda job, options: run_pass(prepare(job, options)), self.found, claimed=claimed, **self.options
        )
