"""Where the cluster comes from: TF_CONFIG (Vertex AI's too), a Slurm job step,
Kubernetes pod labels, a Cloud TPU VM slice, or classic --*_hosts settings; read
through TF's own cluster resolvers and validated into a `spec.ClusterSpec`. Both
programs' flags (`cli.cluster_flags`) make a `Source`. Only the Slurm, Kubernetes and
TPU sources import TensorFlow.
"""

import os
from dataclasses import dataclass

from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import UsageError, first_line

__all__ = ["SOURCES", "Source", "describe", "resolve"]

SOURCES = ("tf_config", "slurm", "kubernetes", "tpu", "flags")
K8S_JOB_LABEL, K8S_ROLE_LABEL = cluster_spec.K8S_JOB_LABEL, cluster_spec.K8S_ROLE_LABEL


HOST_FLAGS = ("chief_host", "ps_hosts", "worker_hosts")


@dataclass(frozen=True)
class Source:
    """Where the cluster is described, and what that source needs. `cluster_resolver`:
    one of `SOURCES`, None where not given (TF_CONFIG, unless --*_hosts are given)."""

    cluster_resolver: str | None = None
    chief_host: str | None = None
    ps_hosts: list | None = None
    worker_hosts: list | None = None
    task_type: str | None = None
    task_index: int = 0
    ps_tasks: int = 1
    port: int = 8470
    k8s_job: str | None = None
    tpu: str | None = None
    tpu_zone: str | None = None
    tpu_project: str | None = None


def resolve(values: Source, expect_roles):
    """This process's `spec.ClusterSpec` from the `Source` `values`, or None when no cluster
    is configured (no TF_CONFIG, nothing else asked for). Blocking: Kubernetes and
    TPU sources ask their APIs. Raises `UsageError` naming the source and what is
    wrong."""
    source = values.cluster_resolver or "tf_config"
    given = [name for name in HOST_FLAGS if getattr(values, name) is not None]
    if given and values.cluster_resolver is not None and source != "flags":
        raise UsageError(
            "--%s describes the cluster; it cannot be combined with --cluster_resolver=%s" % (given[0], source)
        )
    if given:
        source = "flags"
    if source == "tf_config":
        text = os.environ.get("TF_CONFIG")
        return cluster_spec.from_tf_config(text, expect_roles) if text else None
    if source == "flags":
        return _from_flags(values, expect_roles)
    if source == "slurm":
        return _from_slurm(values, expect_roles)
    if source == "kubernetes":
        return _from_kubernetes(values, expect_roles)
    return _from_tpu(values, expect_roles)


def describe(values: Source):
    """The source of the cluster as users name it: TF_CONFIG, or the flags that chose it."""
    if any(getattr(values, name) is not None for name in HOST_FLAGS):
        return "--chief_host/--ps_hosts/--worker_hosts"
    if values.cluster_resolver in (None, "tf_config"):
        return "TF_CONFIG"
    return "--cluster_resolver=%s" % values.cluster_resolver


def _task(values, expect_roles, source):
    """(type, index) of this task for the sources that cannot tell: the coordinator
    is the chief; a server must be told."""
    if values.task_type:
        return values.task_type, values.task_index
    if expect_roles == ("chief",):
        return "chief", 0
    raise UsageError("--cluster_resolver=%s: give this task's --task_type (ps or worker) and --task_index" % source)


def _from_flags(values, expect_roles):
    source = "--cluster_resolver=flags"
    missing = [name for name in HOST_FLAGS if not getattr(values, name)]
    if missing:
        raise UsageError(
            "%s: --%s is missing (give --chief_host, --ps_hosts and --worker_hosts)" % (source, missing[0])
        )
    jobs = {"chief": [values.chief_host], "ps": list(values.ps_hosts), "worker": list(values.worker_hosts)}
    return cluster_spec.validated(jobs, *_task(values, expect_roles, source), expect_roles, source)


def _from_slurm(values, expect_roles):
    import tensorflow as tf

    source = "--cluster_resolver=slurm"
    try:
        tasks = int(os.environ["SLURM_STEP_NUM_TASKS"])
        if tasks < 1 + values.ps_tasks + 1:
            raise UsageError(
                "%s: the step has %d task(s); it needs a chief, --ps_tasks=%d ps and at least 1 worker"
                % (source, tasks, values.ps_tasks)
            )
        jobs = {"chief": 1, "ps": values.ps_tasks, "worker": tasks - 1 - values.ps_tasks}
        # TF's resolver hands out GPUs: on CPU-only nodes it runs nvidia-smi, then steps
        # through 0 GPUs per task and fails. One pretend GPU per task, never exported.
        most = max(int(n.split("(")[0]) for n in os.environ["SLURM_STEP_TASKS_PER_NODE"].split(","))
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
            jobs=jobs, port_base=values.port, gpus_per_node=most, gpus_per_task=1, auto_set_gpu=False
        )
        spec = resolver.cluster_spec().as_dict()
    except KeyError as e:
        raise UsageError(
            "%s: %s is not set (run it inside a Slurm job step, with srun)" % (source, e.args[0])
        ) from None
    except (RuntimeError, ValueError) as e:
        raise UsageError("%s: %s" % (source, e)) from None
    return cluster_spec.validated(spec, resolver.task_type, resolver.task_id, expect_roles, source)


def _from_kubernetes(values, expect_roles):
    import tensorflow as tf

    source = "--cluster_resolver=kubernetes"
    if not values.k8s_job:
        raise UsageError("%s: give --k8s_job, the value of the pods' %s label" % (source, K8S_JOB_LABEL))
    mapping = {
        role: ["%s=%s,%s=%s" % (K8S_JOB_LABEL, values.k8s_job, K8S_ROLE_LABEL, role)] for role in cluster_spec.ROLES
    }
    try:
        resolver = tf.distribute.cluster_resolver.KubernetesClusterResolver(
            job_to_label_mapping=mapping, tf_server_port=values.port, override_client=_PodIPs(kubernetes_api())
        )
        spec = resolver.cluster_spec().as_dict()
    except ImportError:
        raise UsageError("%s needs the Kubernetes client: pip install kubernetes" % source) from None
    except Exception as e:  # a pod not running yet, no API access, no RBAC permission...
        raise UsageError("%s: cannot list the pods: %s" % (source, first_line(e))) from None
    return cluster_spec.validated(spec, *_task(values, expect_roles, source), expect_roles, source)


class _PodIPs:
    """The Kubernetes API as TF's resolver should see it: each pod's own IP where it
    reads the node's (`status.host_ip`), so that pods need not use the host network."""

    def __init__(self, api):
        self._api = api

    def list_pod_for_all_namespaces(self, **kwargs):
        pods = self._api.list_pod_for_all_namespaces(**kwargs)
        for pod in pods.items:
            pod.status.host_ip = pod.status.pod_ip
        return pods


def kubernetes_api():
    """The core API of the Kubernetes cluster this pod runs in."""
    from kubernetes import client, config

    # TF's resolver would load a kubeconfig file on every call, which pods lack.
    config.load_incluster_config()
    return _PodIPs(client.CoreV1Api())


def tpu_resolver(tpu, zone, project):
    import tensorflow as tf

    return tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu, zone=zone, project=project)


def _from_tpu(values, expect_roles):
    source = "--cluster_resolver=tpu"
    if not values.tpu:
        raise UsageError("%s: give --tpu, the Cloud TPU's name" % source)
    try:
        resolver = tpu_resolver(values.tpu, values.tpu_zone, values.tpu_project)
        hosts = [cluster_spec.split_address(a)[0] for a in resolver.cluster_spec().job_tasks("worker")]
    except Exception as e:  # no cloud-tpu-client, no credentials, no such TPU...
        raise UsageError("%s: cannot list the hosts of TPU %s: %s" % (source, values.tpu, first_line(e))) from None
    if len(hosts) < values.ps_tasks:
        raise UsageError(
            "%s: TPU %s has %d host(s), fewer than --ps_tasks=%d" % (source, values.tpu, len(hosts), values.ps_tasks)
        )
    port = values.port
    jobs = {
        "chief": ["%s:%d" % (hosts[0], port)],
        "ps": ["%s:%d" % (host, port + 1) for host in hosts[: values.ps_tasks]],
        "worker": ["%s:%d" % (host, port + 2) for host in hosts],
    }
    return cluster_spec.validated(jobs, *_task(values, expect_roles, source), expect_roles, source)
