"""`python -m tf2_mapreduce.coordinator`: the documented way to run the CLI (`cli`),
TensorFlow's `chief` task of the cluster. Its flags are the CLI's and the cluster
sources'; `--help` lists them."""

from absl import app, flags

from tf2_mapreduce.cli import steps as cli
from tf2_mapreduce.cli.steps import main
from tf2_mapreduce.cluster import sources as cluster_sources

__all__ = ["main"]

# absl's --help lists the main module's flags only: these are defined in `cli` and
# `cluster_sources`, where they are used.
flags.adopt_module_key_flags(cli)
flags.adopt_module_key_flags(cluster_sources)

if __name__ == "__main__":
    app.run(main)
