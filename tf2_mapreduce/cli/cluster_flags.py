"""The flags that choose and describe the cluster, which both programs take (the
coordinator's and the servers'), and the `cluster.sources.Source` they make."""

from absl import flags

from tf2_mapreduce.cluster.sources import HOST_FLAGS, K8S_JOB_LABEL, K8S_ROLE_LABEL, SOURCES, Source

__all__ = ["define", "NAMES", "source"]

NAMES = (
    "cluster_resolver",
    "chief_host",
    "ps_hosts",
    "worker_hosts",
    "task_type",
    "task_index",
    "ps_tasks",
    "port",
    "k8s_job",
    "tpu",
    "tpu_zone",
    "tpu_project",
)


def define(values: flags.FlagValues) -> None:
    """Defines the cluster's flags in `values` (once: both programs' modules may be
    imported in one process)."""
    if "cluster_resolver" in values:
        return
    flags.DEFINE_enum(
        "cluster_resolver",
        "tf_config",
        SOURCES,
        "Where the cluster is described. tf_config: the TF_CONFIG variable (as Kubernetes operators and Vertex "
        "AI set it; without it the coordinator runs a local cluster). slurm: the Slurm job step (rank 0 is the "
        "chief, the next --ps_tasks ranks are ps, the rest workers; ports from --port). kubernetes: running pods "
        "labelled %s=--k8s_job and %s=chief|ps|worker (needs the kubernetes package). tpu: the hosts of Cloud TPU "
        "VM slice --tpu (each host a worker, the first --ps_tasks hosts a ps too, host 0 the chief). flags: "
        "--chief_host, --ps_hosts, --worker_hosts (implied by giving them)." % (K8S_JOB_LABEL, K8S_ROLE_LABEL),
        flag_values=values,
    )
    flags.DEFINE_string("chief_host", None, "The coordinator's host:port.", flag_values=values)
    flags.DEFINE_list("ps_hosts", None, "host:port of every ps task, in order.", flag_values=values)
    flags.DEFINE_list("worker_hosts", None, "host:port of every worker task, in order.", flag_values=values)
    flags.DEFINE_enum(
        "task_type",
        None,
        ["chief", "ps", "worker"],
        "This task's role, for the sources that do not say (flags, kubernetes, tpu).",
        flag_values=values,
    )
    flags.DEFINE_integer(
        "task_index", 0, "This task's index within its role (with --task_type).", lower_bound=0, flag_values=values
    )
    flags.DEFINE_integer(
        "ps_tasks", 1, "With slurm or tpu: how many of the tasks are ps.", lower_bound=1, flag_values=values
    )
    flags.DEFINE_integer(
        "port",
        8470,
        "With slurm: the first port of each node (a node's tasks take consecutive ports). With kubernetes: the "
        "port every pod serves on. With tpu: the chief's port; a host's ps serves on the next, its worker on the "
        "one after.",
        lower_bound=1,
        upper_bound=65533,
        flag_values=values,
    )
    flags.DEFINE_string(
        "k8s_job", None, "With kubernetes: the value of the pods' %s label." % K8S_JOB_LABEL, flag_values=values
    )
    flags.DEFINE_string("tpu", None, "With tpu: the Cloud TPU's name ('local' for this TPU VM).", flag_values=values)
    flags.DEFINE_string("tpu_zone", None, "With tpu: its zone (default: from the metadata server).", flag_values=values)
    flags.DEFINE_string(
        "tpu_project", None, "With tpu: its project (default: from the metadata server).", flag_values=values
    )


def source(values: flags.FlagValues) -> Source:
    """The `Source` the flags in `values` describe; a flag left at its default counts as
    not given where that matters (--cluster_resolver, --*_hosts)."""
    given = {name: values[name].value for name in NAMES}
    for name in ("cluster_resolver", *HOST_FLAGS):
        if not values[name].present:
            given[name] = None
    return Source(**given)
