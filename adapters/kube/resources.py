"""Names Nodeau uses in a Kubernetes cluster: one place, so every part agrees.

The contract is written down in docs/adr/0004-fleet-on-kubernetes.md; deploy/ holds
the manifests that create the namespace, the CRDs and the RBAC these names rely on.
"""

from __future__ import annotations

GROUP = "nodeau.ai"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
NAMESPACE = "nodeau-system"
# a path's parameters for our custom objects, for requests sent as plain JSON (send_json)
CUSTOM_PATH = {"group": GROUP, "version": VERSION, "namespace": NAMESPACE}

GPUSERVICE_KIND = "GPUService"
GPUSERVICES = "gpuservices"
BATCHJOB_KIND = "BatchJob"
BATCHJOBS = "batchjobs"

# the fleet-wide scheduling policy
SCHEDULING_CONFIGMAP = "nodeau-scheduling"
POLICY_KEY = "policy"
# machine health as the controller last assessed it (one key per machine)
HEALTH_CONFIGMAP = "nodeau-health"
# copy requests: which machine keeps a verified copy of which artifact, who asks
COPIES_CONFIGMAP = "nodeau-copies"
COPIES_KEY = "requests"
# the installation's id, its installed entitlement and the clock anchor
QUALIFICATIONS_CONFIGMAP = "nodeau-qualifications"  # one key per artifact (SHA-256 hex)

ENTITLEMENT_CONFIGMAP = "nodeau-entitlement"
INSTALLATION_KEY = "installation"
ENTITLEMENT_KEY = "entitlement"
ANCHOR_KEY = "anchor"
# the organisation's policy: roles, limits and quotas (docs/organisation-format.md)
ORGANISATION_CONFIGMAP = "nodeau-organisation"
ORGANISATION_KEY = "organisation.json"

# marks on a Node (a person's choices; they never stop, move or restart anything)
DRAINED_LABEL = f"{GROUP}/drained"
DRAINED_AT_ANNOTATION = f"{GROUP}/drained-at"
POLICY_LABEL = f"{GROUP}/scheduling-policy"
UPGRADING_LABEL = f"{GROUP}/upgrading"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"

# the agent's own Lease per machine, beside the kubelet's node Lease
AGENT_LEASE_PREFIX = "nodeau-agent-"
REPORT_ANNOTATION = f"{GROUP}/report"
MACHINE_LABEL = f"{GROUP}/machine"
NODE_LEASE_NAMESPACE = "kube-node-lease"
AGENT_LEASE_SECONDS = 40

# what the controller creates for a workload
WORKLOAD_LABEL = f"{GROUP}/workload"
KIND_LABEL = f"{GROUP}/kind"
FINALIZER = f"{GROUP}/reservation"
# the model server scripts/build-images builds (CPU); a card needs a CUDA build (docs/images.md)
SERVER_IMAGE = "localhost/nodeau-llama-server:0.3.36-cpu"
CUDA_SERVER_IMAGE = "localhost/nodeau-llama-server:0.3.36-cuda"  # scripts/build-images --cuda
SERVER_PORT = 8080
CONTROLLER_COMPONENT = "nodeau-controller"


def agent_lease_name(machine: str) -> str:
    """The name of a machine's agent Lease in nodeau-system."""
    return f"{AGENT_LEASE_PREFIX}{machine}"


def server_pod_name(kind_label: str, workload: str) -> str:
    """The name of the model-server Pod of a workload (``service`` or ``batch``)."""
    return f"{kind_label}-{workload}"
