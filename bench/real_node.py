"""A real node: this machine joins a test control plane with a real kubelet and runs Nodeau on it.

Usage (as root, after NODEAU_KUBE_NODE=1 scripts/build-kube-binaries, scripts/build-images):
.venv/bin/python bench/real_node.py [--keep]. deploy/ as shipped, but for what this node needs
(no kube-proxy): host network, the API server's loopback address, a simulated card (docs/images.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.real.kube_apply import MANIFESTS, apply_manifests, manifest_documents  # noqa: E402
from tests.support.real.kube_cluster import (  # noqa: E402
    K8S_VERSION,
    Cluster,
    ControlPlane,
    binary_dir,
    free_port,
)
from tests.support.real.real_models import SMOLLM2, fetch  # noqa: E402

NODE_BINARIES = ("kubelet", "kube-controller-manager", "kube-scheduler")
TOOLS = {"containerd": "containerd", "runc": "runc", "buildah": "buildah", "gcc": "gcc"}
CNI_DIR = Path("/usr/lib/cni")
STORE = Path("/var/lib/nodeau")  # the agent's hostPath in deploy/40-agent.yaml
PAUSE = "localhost/pause:3.10.1"
SUBNET = "10.89.0.0/24"
SIMULATED = "1 x 24 GiB"
QUESTION = "What is the capital of France? Answer in one word."
SERVICE_PODS = "nodeau.ai/kind=service"


def wait(predicate: Callable[[], bool], what: str, timeout_s: float, poll_s: float = 1.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"real node: {what} did not happen within {timeout_s:g} s")
        time.sleep(poll_s)


def node_ip() -> str:
    """The machine's first non-loopback IPv4 address (the kubelet refuses a loopback one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing address
        address: str = s.getsockname()[0]
    if address.startswith("127."):
        raise SystemExit("real node: this machine has no IPv4 address but loopback")
    return address


def preconditions() -> Path:
    if os.geteuid() != 0:
        raise SystemExit("real node: run as root (a kubelet and containerd need it)")
    missing = [pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None]
    if not (CNI_DIR / "bridge").is_file():
        missing.append("containernetworking-plugins")
    if missing:
        raise SystemExit(f"real node: apt-get install {' '.join(missing)}")
    bins = binary_dir()
    absent = [b for b in NODE_BINARIES if not (bins / b).is_file()]
    if absent:
        raise SystemExit(
            f"real node: {', '.join(absent)} not in {bins}: "
            "run NODEAU_KUBE_NODE=1 scripts/build-kube-binaries"
        )
    return bins


def image_names() -> tuple[str, str]:
    names = subprocess.run(
        [str(ROOT / "scripts/build-images"), "--names"], check=True, capture_output=True, text=True
    ).stdout.split()
    return names[0], names[1]


def archive_of(image: str) -> Path:
    cache = Path(os.environ.get("NODEAU_IMAGE_CACHE", Path.home() / ".cache/nodeau/images"))
    name = image.removeprefix("localhost/").replace(":", "_").replace("/", "_")
    path = cache / f"{name}.oci.tar"
    if not path.is_file():
        raise SystemExit(f"real node: {path} is missing: run scripts/build-images")
    return path


def pause_archive(work: Path) -> Path:
    """The Pod sandbox's image, from the pause.c the kubernetes module ships."""
    gomodcache = subprocess.run(
        ["go", "env", "GOMODCACHE"], check=True, capture_output=True, text=True,
        env={**os.environ, "PATH": os.environ["PATH"] + ":/usr/local/go/bin"},
    ).stdout.strip()  # fmt: skip
    source = Path(gomodcache) / f"k8s.io/kubernetes@{K8S_VERSION}/build/pause/linux/pause.c"
    binary = work / "pause"
    subprocess.run(["gcc", "-Os", "-static", "-DVERSION=3.10.1", "-o", binary, source], check=True)
    env = {**os.environ, "STORAGE_DRIVER": "vfs", "BUILDAH_ISOLATION": "chroot"}

    def buildah(*argv: str) -> str:
        done = subprocess.run(
            ["buildah", *argv], check=True, capture_output=True, text=True, env=env
        )
        return done.stdout.strip()

    ctr = buildah("from", "scratch")
    buildah("copy", ctr, str(binary), "/pause")
    buildah("config", "--entrypoint", '["/pause"]', "--user", "65535:65535", ctr)
    buildah("commit", "--quiet", "--rm", ctr, PAUSE)
    archive = work / "pause.oci.tar"
    buildah("push", "--quiet", PAUSE, f"oci-archive:{archive}:{PAUSE}")
    return archive


def containerd_config(work: Path) -> Path:
    root = work / "containerd"
    (work / "cni").mkdir()
    (work / "cni/10-nodeau.conflist").write_text(json.dumps({
        "cniVersion": "1.0.0", "name": "nodeau-node", "plugins": [
            {"type": "bridge", "bridge": "cni-nodeau0", "isGateway": True, "ipMasq": False,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": SUBNET}]],
                      "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ]}))  # fmt: skip
    path = work / "containerd.toml"
    path.write_text(f"""version = 2
root = "{root}/root"
state = "{root}/state"
[grpc]
  address = "{root}/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE}"
  # this VM refuses a negative oom_score_adj (no CAP_SYS_RESOURCE): keep containerd's own
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_DIR}"
    conf_dir = "{work}/cni"
""")
    return root / "containerd.sock"


# kubelet 1.35 refuses a cgroup v1 host (as this VM's is) unless ``failCgroupV1: false``
def kubelet_config(work: Path, sock: Path, address: str) -> Path:
    path = work / "kubelet.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs", "failSwapOn": False, "failCgroupV1": False,
        "containerRuntimeEndpoint": f"unix://{sock}",
        "address": address, "port": free_port(), "readOnlyPort": 0, "healthzPort": 0,
        "enforceNodeAllocatable": [], "serializeImagePulls": False,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%"},
        "resolvConf": "/etc/resolv.conf",
    }))  # fmt: skip
    return path


def deploy_documents(cluster: Cluster, images: tuple[str, str]) -> list[dict[str, Any]]:
    """deploy/ as shipped, but for the differences this node needs (the module's
    docstring): host network and the API server's loopback address for the agent and the
    controller, and a simulated card for the agent (so no probe of the CUDA image)."""
    api_port = cluster.server.rsplit(":", 1)[1]
    documents = list(manifest_documents(MANIFESTS))
    for doc in documents:
        if doc["kind"] not in ("DaemonSet", "Deployment"):
            continue
        pod = doc["spec"]["template"]["spec"]
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"
        # a simulated card needs no CUDA image: its probe (and the answer it writes) go
        pod["initContainers"] = [
            c for c in pod.get("initContainers", []) if c["name"] != "server-probe"
        ]
        for container in pod["containers"]:
            container["args"] = [
                a for a in container.get("args", []) if not a.startswith("--server-")
            ]
            container["volumeMounts"] = [
                m for m in container.get("volumeMounts", []) if m["name"] != "server-probe"
            ]
        for container in pod["containers"]:
            env = container.setdefault("env", [])
            env += [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
                    {"name": "KUBERNETES_SERVICE_PORT", "value": api_port}]  # fmt: skip
            if doc["kind"] == "DaemonSet":
                env.append({"name": "NODEAU_SIMULATED_GPUS", "value": SIMULATED})
            assert container["image"] == images[0], container["image"]
    return documents


def cli(cluster: Cluster, work: Path, *argv: str, timeout_s: float = 600) -> str:
    env = {**os.environ, "NODEAU_PLANE": "kubernetes", "KUBECONFIG": str(cluster.kubeconfig),
           "NODEAU_HOME": str(work / "cli-home")}  # fmt: skip
    done = subprocess.run(
        [str(ROOT / ".venv/bin/nodeau"), *argv], capture_output=True, text=True, env=env,
        timeout=timeout_s, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"real node: nodeau {' '.join(argv)} failed: {done.stderr.strip()}")
    return done.stdout


def reports_smol(api: Any) -> bool:
    from nodeau.adapters.kube.reports import read_reports

    return any("smol" in a.names for rep in read_reports(api) for a in rep.artifacts)


def pods_running(core: client.CoreV1Api, selector: str) -> bool:
    pods = core.list_namespaced_pod("nodeau-system", label_selector=selector).items
    return bool(pods) and all(
        p.status is not None
        and p.status.phase == "Running"
        and all(c.ready for c in (p.status.container_statuses or []))
        for p in pods
    )


class Clock:
    """Seconds since the run started, printed with each step."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def step(self, what: str) -> None:
        print(f"  {time.monotonic() - self.started:7.1f} s  {what}", flush=True)


def start_node(
    plane: ControlPlane, work: Path, bins: Path, images: tuple[str, str], clock: Clock
) -> tuple[Cluster, Any, str]:
    """The control plane, containerd with the images, the controller-manager, the scheduler
    and the kubelet, until the node is Ready; the cluster, an admin client, the node."""
    machine = socket.gethostname().lower().split(".")[0] or "nodeau-node"
    address = node_ip()
    print(f"real node {machine} ({address}), work folder {work}", flush=True)
    cluster = plane.start(kwok=False, service_accounts=True)
    clock.step("etcd and kube-apiserver ready")
    sock = containerd_config(work)
    plane._spawn("containerd", ["containerd", "--config", str(work / "containerd.toml")])
    wait(sock.exists, "containerd's socket", 30, 0.2)
    ctr = ["ctr", "--address", str(sock), "-n", "k8s.io"]
    for archive in (pause_archive(work), *(archive_of(i) for i in images)):
        subprocess.run([*ctr, "images", "import", str(archive)], check=True, capture_output=True)
    clock.step(f"containerd {containerd_version()} running, images imported (nothing pulled): "
               f"{', '.join((PAUSE, *images))}")  # fmt: skip
    kubeconfig = str(cluster.kubeconfig)
    plane._spawn("kube-controller-manager", [
        str(bins / "kube-controller-manager"), f"--kubeconfig={kubeconfig}",
        f"--service-account-private-key-file={work / 'service-account.key'}",
        f"--root-ca-file={cluster.ca_file}", "--leader-elect=false",
        "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
        "--use-service-account-credentials=false",
    ])  # fmt: skip
    plane._spawn("kube-scheduler", [
        str(bins / "kube-scheduler"), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
        "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
    ])  # fmt: skip
    plane._spawn("kubelet", [
        str(bins / "kubelet"), f"--config={kubelet_config(work, sock, address)}",
        f"--kubeconfig={kubeconfig}", f"--root-dir={work / 'kubelet'}",
        f"--hostname-override={machine}", f"--node-ip={address}", "--v=1",
    ])  # fmt: skip
    api = config.new_client_from_config(kubeconfig)  # type: ignore[no-untyped-call]
    core = client.CoreV1Api(api)

    def node_ready() -> bool:
        try:
            node: Any = core.read_node(machine)
        except client.ApiException:
            return False
        return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)

    wait(node_ready, f"node {machine} Ready", 120)
    clock.step(f"kubelet {K8S_VERSION}: node {machine} registered and Ready")
    return cluster, api, machine


def install(cluster: Cluster, api: Any, work: Path, images: tuple[str, str], clock: Clock) -> None:
    """A model in this machine's store, then deploy/, until the agent reports it."""
    model = fetch(SMOLLM2)
    STORE.mkdir(parents=True, exist_ok=True)
    mine = work / model.name  # (the store hard-links it; the agent gives it to its uid)
    shutil.copyfile(model, mine)
    subprocess.run(
        [str(ROOT / ".venv/bin/nodeau"), "models", "import", str(mine), "--alias", "smol"],
        check=True, capture_output=True, env={**os.environ, "NODEAU_HOME": str(STORE)},
    )  # fmt: skip
    clock.step(f"SmolLM2-135M-Instruct imported into this machine's store {STORE}")
    path = work / "deploy.yaml"
    path.write_text(yaml.safe_dump_all(deploy_documents(cluster, images)))
    apply_manifests(api, [path])
    core = client.CoreV1Api(api)
    wait(lambda: pods_running(core, "app.kubernetes.io/component=nodeau-agent"),
         "the agent DaemonSet's Pod running", 180)  # fmt: skip
    clock.step("deploy/ applied; the agent DaemonSet's Pod runs on this node")
    wait(lambda: pods_running(core, "app.kubernetes.io/component=nodeau-controller"),
         "the controller Deployment's Pods running", 180)  # fmt: skip
    clock.step("the controller Deployment's Pods run (two replicas, one leads)")
    wait(lambda: reports_smol(api), "the agent's report listing smol verified", 120, 2)
    clock.step("the agent reports this machine, its card and smol verified:")
    print(indented(cli(cluster, work, "fleet", "list")), flush=True)


def serve(cluster: Cluster, api: Any, work: Path, clock: Clock, *, keep: bool) -> None:
    """``nodeau run`` on the fleet, a question through the endpoint, ``nodeau stop``."""
    core = client.CoreV1Api(api)
    ran = json.loads(cli(cluster, work, "run", "smol", "--name", "smol", "--unproved",
                         "--context", "2048", "--wait", "300", "--json"))  # fmt: skip
    endpoint = ran["workload"]["endpoint"]
    clock.step(f"nodeau run: admitted on {ran['workload']['machine']}, {ran['source']} "
               f"{ran['reserved_bytes']} bytes; its loopback endpoint {endpoint}")  # fmt: skip
    wait(lambda: "serving" in cli(cluster, work, "ps"), "smol serving", 300, 2)
    pod: Any = core.read_namespaced_pod("service-smol", "nodeau-system")
    clock.step(f"its model-server Pod {pod.metadata.name} serves on {pod.spec.node_name} "
               f"at {pod.status.pod_ip} ({pod.spec.containers[0].image})")  # fmt: skip
    clock.step(f"the openai client through the loopback endpoint: {ask(endpoint)!r}")
    print(indented(cli(cluster, work, "ps")), flush=True)
    if keep:
        return
    cli(cluster, work, "stop", "smol", "--workload")

    def gone() -> bool:
        return not core.list_namespaced_pod("nodeau-system", label_selector=SERVICE_PODS).items

    wait(gone, "the model-server Pod gone", 120)
    clock.step("nodeau stop --workload: the Pod is gone and its card free")


def indented(text: str) -> str:
    return "\n".join("      " + line for line in text.rstrip().splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="leave everything running")
    args = parser.parse_args()
    bins = preconditions()
    images = image_names()
    work = Path(tempfile.mkdtemp(prefix="nodeau-real-node-"))
    plane = ControlPlane(work)
    clock = Clock()
    try:
        cluster, api, _machine = start_node(plane, work, bins, images, clock)
        install(cluster, api, work, images, clock)
        serve(cluster, api, work, clock, keep=args.keep)
        if args.keep:
            print(f"left running; KUBECONFIG={cluster.kubeconfig}")
    finally:
        if not args.keep:
            teardown(plane, work)


def ask(endpoint: str) -> str:
    from openai import OpenAI

    answer = OpenAI(base_url=endpoint, api_key="none").chat.completions.create(
        model="smol", messages=[{"role": "user", "content": QUESTION}], max_tokens=24,
        temperature=0,
    )  # fmt: skip
    return (answer.choices[0].message.content or "").strip()


def containerd_version() -> str:
    out = subprocess.run(
        ["containerd", "--version"], check=False, capture_output=True, text=True
    ).stdout
    return out.split()[2] if len(out.split()) > 2 else out.strip()


def teardown(plane: ControlPlane, work: Path) -> None:
    """Stop the Pods' containers, every process, and remove what they left."""
    sock = work / "containerd/containerd.sock"
    if sock.exists():
        ctr = ["ctr", "--address", str(sock), "-n", "k8s.io"]
        tasks = subprocess.run(
            [*ctr, "tasks", "ls", "-q"], check=False, capture_output=True, text=True
        )
        for task in tasks.stdout.split():
            kill = [*ctr, "tasks", "kill", "-s", "SIGKILL", task]
            subprocess.run(kill, check=False, capture_output=True)
    plane.stop()
    with open("/proc/mounts") as mounts:
        inside = [line.split()[1] for line in mounts if line.split()[1].startswith(str(work))]
    for point in sorted(inside, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)
    subprocess.run(["ip", "link", "delete", "cni-nodeau0"], check=False, capture_output=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
