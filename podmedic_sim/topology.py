"""Bootstrap of the simulated cluster: namespaces, GPU nodes, DeviceClasses and ResourceSlices.

Objects are written straight into the store (no validation round trip) so that a
10,000-node, 80,000-device cluster comes up in a few seconds.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.config import SimConfig
from podmedic_sim.store import Store

POOL_LABEL = "sim.podmedic.io/pool"
PRODUCT_LABEL = "nvidia.com/gpu.product"


def node_name(index: int) -> str:
    """Contract name of the index-th node."""
    return f"node-{index:04d}"


def slice_name(node: str, driver: str) -> str:
    """Contract name of a node's ResourceSlice for a driver."""
    return f"{node}-{driver}"


def bootstrap(store: Store, config: SimConfig) -> None:
    """Create everything a fresh cluster has; objects that already exist are left alone."""
    rng = random.Random(config.seed)
    for ns in ("default", "kube-system"):
        if store.find("namespaces", None, ns) is None:
            store.create(
                "namespaces",
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
                    "spec": {"finalizers": ["kubernetes"]},
                    "status": {"phase": "Active"},
                },
            )
    for driver in config.drivers:
        if store.find("deviceclasses", None, driver) is None:
            store.create("deviceclasses", device_class(driver))
    for i in range(config.nodes):
        name = node_name(i)
        if store.find("nodes", None, name) is None:
            store.create("nodes", node(name, i, config))
        for driver in config.drivers:
            if store.find("resourceslices", None, slice_name(name, driver)) is None:
                store.create("resourceslices", resource_slice(name, driver, config, rng))


def device_class(driver: str) -> Obj:
    """A DeviceClass named after its driver, selecting the driver's devices by CEL."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def node(name: str, index: int, config: SimConfig) -> Obj:
    """A Ready GPU node with the usual labels, capacity and preloaded images."""
    gpus = str(config.devices_per_node)
    resources = {"cpu": "192", "memory": "2113638120Ki", "pods": "110", "ephemeral-storage": "7Ti",
                 **{r: str(n) for r, n in config.device_plugins.items()}}
    images: list[dict[str, Any]] = [
        {"names": [image], "sizeBytes": config.image_size_bytes}
        for image in config.preloaded_images
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                PRODUCT_LABEL: config.device_model,
                "nvidia.com/gpu.count": gpus,
                POOL_LABEL: f"pool-{index // max(config.node_pool_size, 1):03d}",
            },
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": None,
                    "lastTransitionTime": None,
                }
            ],
            "addresses": [
                {
                    "type": "InternalIP",
                    "address": f"10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}",
                },
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.37.0",
                "containerRuntimeVersion": "containerd://2.1.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "Ubuntu 24.04 LTS",
                "kernelVersion": "6.8.0",
                "kubeProxyVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
            "images": images,
        },
    }


def resource_slice(node_name_: str, driver: str, config: SimConfig, rng: random.Random) -> Obj:
    """The node's ResourceSlice for a driver, with ``gpu-0``..``gpu-(N-1)``."""
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "model": {"string": config.device_model},
                "uuid": {"string": f"GPU-{uuid.UUID(int=rng.getrandbits(128), version=4)}"},
                "index": {"int": i},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(config.devices_per_node)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": slice_name(node_name_, driver)},
        "spec": {
            "driver": driver,
            "nodeName": node_name_,
            "pool": {"name": node_name_, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }
