"""Which Pod a process runs in, from ``/proc/PID/cgroup`` as kubelets and the kernel write it.

The shapes real nodes give (cgroup v1 and v2, cgroupfs and systemd drivers, several runtimes,
kind, cgroup namespaces), then a Hypothesis fuzz over generated UIDs and arbitrary text.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodeau.adapters.pod_cgroup import ProcCgroupPods, pod_uid

UID = "0b8a0e3e-2f0c-4a2b-9a5d-3b2f1c6e7d8a"
ESCAPED = UID.replace("-", "_")
CID = "4f1c2b3a9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a"
V1_CONTROLLERS = (
    "hugetlb", "memory", "devices", "cpu,cpuacct", "pids", "blkio", "net_cls,net_prio",
    "cpuset", "freezer", "perf_event", "rdma", "misc",
)  # fmt: skip


def v1(path: str) -> str:
    """A cgroup v1 file: one line per hierarchy, the same path in each, and systemd's own."""
    lines = [f"{12 - i}:{c}:{path}" for i, c in enumerate(V1_CONTROLLERS)]
    return "\n".join([*lines, f"1:name=systemd:{path}", "0::/"]) + "\n"


def v2(path: str) -> str:
    return f"0::{path}\n"


REAL = {
    "v1 cgroupfs burstable": v1(f"/kubepods/burstable/pod{UID}/{CID}"),
    "v1 cgroupfs besteffort": v1(f"/kubepods/besteffort/pod{UID}/{CID}"),
    "v1 cgroupfs guaranteed": v1(f"/kubepods/pod{UID}/{CID}"),
    "v1 systemd containerd": v1(
        "/kubepods.slice/kubepods-burstable.slice/"
        f"kubepods-burstable-pod{ESCAPED}.slice/cri-containerd-{CID}.scope"
    ),
    "v1 systemd docker guaranteed": v1(
        f"/kubepods.slice/kubepods-pod{ESCAPED}.slice/docker-{CID}.scope"
    ),
    "v2 systemd containerd": v2(
        "/kubepods.slice/kubepods-besteffort.slice/"
        f"kubepods-besteffort-pod{ESCAPED}.slice/cri-containerd-{CID}.scope"
    ),
    "v2 systemd cri-o": v2(
        "/kubepods.slice/kubepods-burstable.slice/"
        f"kubepods-burstable-pod{ESCAPED}.slice/crio-{CID}.scope"
    ),
    "v2 cgroupfs": v2(f"/kubepods/burstable/pod{UID}/{CID}"),
    "v2 kind (kubelet cgroup root)": v2(
        "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
        f"kubelet-kubepods-besteffort-pod{ESCAPED}.slice/cri-containerd-{CID}.scope"
    ),
    "v2 read from another container's cgroup namespace (systemd)": v2(
        f"/../../kubepods-besteffort.slice/kubepods-besteffort-pod{ESCAPED}.slice/"
        f"cri-containerd-{CID}.scope"
    ),
    "v2 read from another container's cgroup namespace (cgroupfs)": v2(
        f"/../../../besteffort/pod{UID}/{CID}"
    ),
    "v2 a removed cgroup": v2(f"/kubepods/burstable/pod{UID}/{CID} (deleted)"),
    "v2 upper-case hex": v2(f"/kubepods/besteffort/pod{UID.upper()}/{CID}"),
}


@pytest.mark.parametrize("layout", sorted(REAL))
def test_every_real_layout_names_the_pod_uid_as_the_api_server_writes_it(layout: str) -> None:
    assert pod_uid(REAL[layout]) == UID


def test_a_static_pod_is_named_by_its_config_hash() -> None:
    config_hash = "6ef6c1b1d5a5e1e9e8d1c7c8a0b0f0e1"
    assert pod_uid(v2(f"/kubepods/burstable/pod{config_hash}/{CID}")) == config_hash
    systemd = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{config_hash}.slice"
    assert pod_uid(v1(f"{systemd}/cri-containerd-{CID}.scope")) == config_hash


@pytest.mark.parametrize(
    "text",
    [
        v2("/system.slice/containerd.service"),  # the runtime itself, on the host
        v2("/user.slice/user-1000.slice/session-3.scope"),  # a person's shell
        v1("/system.slice/docker-" + CID + ".scope"),  # a Docker container outside Kubernetes
        v2("/kubepods/burstable"),  # a QoS slice, no Pod under it
        v2("/kubepods.slice/kubepods-besteffort.slice"),
        v2("/"),
        "",
        "not a cgroup file",
        v2(f"/kubepods/burstable/pod{ESCAPED}/{CID}"),  # cgroupfs never escapes the dashes
        v2(f"/kubepods.slice/kubepods-pod{UID}.slice/{CID}"),  # systemd always does
        v2(f"/kubepods/burstable/pod{UID[:-1]}/{CID}"),  # one digit short
        v2(f"/kubepods/burstable/xpod{UID}/{CID}"),
    ],
)
def test_a_process_outside_any_pod_names_none(text: str) -> None:
    assert pod_uid(text) is None


def test_lines_naming_two_pods_name_none() -> None:
    other = "11111111-2222-3333-4444-555555555555"
    text = f"12:memory:/kubepods/pod{UID}/{CID}\n11:pids:/kubepods/pod{other}/{CID}\n"
    assert pod_uid(text) is None


def test_the_adapter_reads_proc_pid_cgroup_and_names_none_for_a_process_gone(
    tmp_path: Path,
) -> None:
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(REAL["v2 systemd containerd"], encoding="utf-8")
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "cgroup").write_bytes(b"0::/kubepods/pod\xff\xfe/x\n")  # not UTF-8
    pods = ProcCgroupPods(tmp_path)
    assert pods.pod_of(4242) == UID
    assert pods.pod_of(4243) is None  # ended: no folder
    assert pods.pod_of(77) is None


# -- fuzz ---------------------------------------------------------------------------------------

QOS = st.sampled_from(["", "burstable", "besteffort"])
RUNTIME = st.sampled_from(["cri-containerd", "crio", "docker"])
ROOT = st.sampled_from(["", "kubelet"])  # a kubelet's own --cgroup-root, as kind sets
UP = st.integers(min_value=0, max_value=4)  # read from a cgroup namespace this many levels down


def systemd_path(uid: str, qos: str, runtime: str, root: str, up: int) -> str:
    prefix = f"{root}-kubepods" if root else "kubepods"
    slices = [f"{root}.slice"] if root else []
    slices.append(f"{prefix}.slice")
    if qos:
        prefix = f"{prefix}-{qos}"
        slices.append(f"{prefix}.slice")
    slices += [f"{prefix}-pod{uid.replace('-', '_')}.slice", f"{runtime}-{CID}.scope"]
    kept = slices[min(up, len(slices) - 2) :] if up else slices
    return "/" + "/".join([".."] * up + kept)


def cgroupfs_path(uid: str, qos: str, up: int) -> str:
    parts = ["kubepods", *([qos] if qos else []), f"pod{uid}", CID]
    kept = parts[min(up, len(parts) - 2) :] if up else parts
    return "/" + "/".join([".."] * up + kept)


@given(
    uid=st.uuids().map(str),
    qos=QOS,
    runtime=RUNTIME,
    root=ROOT,
    up=UP,
    version=st.sampled_from(["v1", "v2"]),
    driver=st.sampled_from(["systemd", "cgroupfs"]),
)
def test_every_layout_around_any_uid_names_that_uid(
    uid: str, qos: str, runtime: str, root: str, up: int, version: str, driver: str
) -> None:
    path = (
        systemd_path(uid, qos, runtime, root, up)
        if driver == "systemd"
        else cgroupfs_path(uid, qos, up)
    )
    text = v1(path) if version == "v1" else v2(path)
    assert pod_uid(text) == uid


@given(st.text())
def test_any_text_names_no_pod_or_a_well_formed_uid(text: str) -> None:
    found = pod_uid(text)
    if found is not None:
        assert found == found.lower()
        assert len(found) == 32 or str(uuid.UUID(found)) == found


@given(uid=st.uuids().map(str), noise=st.lists(st.text(alphabet="abc:/._-0123456789 ")))
def test_lines_of_other_cgroups_around_a_pods_line_do_not_change_its_uid(
    uid: str, noise: list[str]
) -> None:
    lines = [n for n in noise if pod_uid(n) is None]
    lines.insert(len(lines) // 2, f"0::/kubepods/besteffort/pod{uid}/{CID}")
    assert pod_uid("\n".join(lines)) == uid
