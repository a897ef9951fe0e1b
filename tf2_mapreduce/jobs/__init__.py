"""The built-in jobs, by name (`--job`)."""

from tf2_mapreduce.jobs import wordcount
from tf2_mapreduce.jobs.base import Job

__all__ = ["Job", "JOBS"]

JOBS = {job.name: job for job in (wordcount.JOB,)}
