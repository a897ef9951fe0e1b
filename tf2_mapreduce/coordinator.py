"""`python -m tf2_mapreduce.coordinator`: the documented way to run the CLI (`cli`),
TensorFlow's `chief` task of the cluster."""

from absl import app

from tf2_mapreduce.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    app.run(main)
