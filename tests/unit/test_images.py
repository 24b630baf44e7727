"""The images deploy/ runs are the ones scripts/build-images builds, by the same names:
the controller's and the agent's containers, the images the controller gives workload Pods
(its --server-image, --cuda-server-image and --worker-image in deploy/, and its defaults),
the agent's probe of the CUDA image, and the Pods it makes.
The build itself is checked by running the script (docs/images.md has its figures)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from nodeau.adapters.kube import resources as r
from nodeau.adapters.kube.pods import NODEAU_IMAGE, PodImages
from nodeau.apps.controller.__main__ import parser

ROOT = Path(__file__).resolve().parents[2]


def built() -> tuple[str, str, str]:
    done = subprocess.run(
        [str(ROOT / "scripts/build-images"), "--names"],
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    nodeau, server, cuda = done.stdout.split()
    return nodeau, server, cuda


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((ROOT / "deploy" / name).read_text()) if d]


def test_the_script_names_nodeaus_image_by_the_projects_version_and_the_servers_by_llama_cpp() -> (
    None
):
    nodeau, server, cuda = built()
    assert nodeau == "localhost/nodeau:0.1.0"
    assert server == "localhost/nodeau-llama-server:0.3.36-cpu"
    assert cuda == "localhost/nodeau-llama-server:0.3.36-cuda"


def test_deploy_runs_the_built_images_and_gives_the_controller_the_built_server() -> None:
    nodeau, server, cuda = built()
    [controller] = [d for d in documents("30-controller.yaml") if d["kind"] == "Deployment"]
    [container] = controller["spec"]["template"]["spec"]["containers"]
    assert container["image"] == nodeau
    assert f"--server-image={server}" in container["args"]
    assert f"--cuda-server-image={cuda}" in container["args"]
    assert f"--worker-image={nodeau}" in container["args"]
    parsed = parser().parse_args(container["args"])
    assert (parsed.server_image, parsed.cuda_server_image, parsed.worker_image) == (
        server,
        cuda,
        nodeau,
    )
    [agent] = [d for d in documents("40-agent.yaml") if d["kind"] == "DaemonSet"]
    pod = agent["spec"]["template"]["spec"]
    [probe] = [c for c in pod["initContainers"] if c["name"] == "server-probe"]
    assert probe["image"] == cuda  # the agent reports what the CUDA image says it can use
    assert f"--server-image={cuda}" in pod["containers"][0]["args"]
    others = [c for c in pod["containers"] + pod["initContainers"] if c["name"] != "server-probe"]
    assert {c["image"] for c in others} == {nodeau}


def test_the_controllers_defaults_are_the_built_images_too() -> None:
    nodeau, server, cuda = built()
    defaults = parser().parse_args([])
    assert (defaults.server_image, defaults.cuda_server_image, defaults.worker_image) == (
        server,
        cuda,
        nodeau,
    )
    images = PodImages()
    assert (images.server, images.cuda_server, images.nodeau) == (
        r.SERVER_IMAGE,
        r.CUDA_SERVER_IMAGE,
        NODEAU_IMAGE,
    )
    assert (server, cuda, nodeau) == (r.SERVER_IMAGE, r.CUDA_SERVER_IMAGE, NODEAU_IMAGE)
