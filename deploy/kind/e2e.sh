#!/usr/bin/env bash
# podmedic end to end on a real cluster: kind with the DRA feature gates, the dra-example-driver,
# podmedic from deploy/kustomize/overlays/kind, one injected device fault, then the e2e tests.
# Needs docker, kind v0.33.0, kubectl, helm and git; the image itself is built by `make image` (no
# Docker build). Not run in CI (kind needs Docker and its node image from a registry). Usage:
#   deploy/kind/e2e.sh            # create the cluster, install, inject, test
#   KEEP=1 deploy/kind/e2e.sh     # keep the cluster afterwards (kind delete cluster --name podmedic)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CLUSTER=${CLUSTER:-podmedic}
KUBECONFIG_FILE=${KUBECONFIG_FILE:-$ROOT/state/kind/kubeconfig}
DRIVER_REF=${DRIVER_REF:-main}
mkdir -p "$(dirname "$KUBECONFIG_FILE")"
export KUBECONFIG=$KUBECONFIG_FILE
cleanup() { [[ "${KEEP:-0}" == 1 ]] || kind delete cluster --name "$CLUSTER"; }
trap cleanup EXIT

echo "== kind cluster with DRA and device taints"
kind create cluster --name "$CLUSTER" --config "$ROOT/deploy/kind/cluster.yaml" --kubeconfig "$KUBECONFIG_FILE" \
  ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}

echo "== dra-example-driver (simulated GPUs gpu.example.com)"
src=$(mktemp -d)
git clone --depth 1 --branch "$DRIVER_REF" https://github.com/kubernetes-sigs/dra-example-driver "$src"
helm upgrade -i --create-namespace -n dra-example-driver dra-example-driver \
  "$src/deployments/helm/dra-example-driver" --wait --timeout 5m

echo "== podmedic image (make image) and manifests"
make -C "$ROOT" image
archive=$("$ROOT/.venv/bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["archive"])' \
  "$ROOT/build/image/image.json")
kind load image-archive "$archive" --name "$CLUSTER"   # containerd names it docker.io/library/podmedic:<version>
kubectl create namespace podmedic --dry-run=client -o yaml | kubectl apply -f -
kubectl -n podmedic create secret generic podmedic-ingest-token \
  --from-literal=token="$(head -c 24 /dev/urandom | base64)" --dry-run=client -o yaml | kubectl apply -f -
kubectl apply -k "$ROOT/deploy/kustomize/overlays/kind"
kubectl -n podmedic rollout status deploy/temporal-dev deploy/podmedic-worker deploy/podmedic-ingest --timeout 5m

echo "== a GPU job and a device fault"
kubectl apply -f "$ROOT/deploy/kind/workload.yaml"
kubectl -n podmedic-e2e wait --for=condition=Ready pod/gpu-job --timeout 3m
device=$(kubectl -n podmedic-e2e get resourceclaim -o jsonpath='{.items[0].status.allocation.devices.results[0].device}')
node=$(kubectl -n podmedic-e2e get pod gpu-job -o jsonpath='{.spec.nodeName}')
echo "   gpu-job runs on $node device $device; the driver marks it unhealthy (a ResourceSlice taint)"
PODMEDIC_E2E_KUBECONFIG=$KUBECONFIG_FILE PODMEDIC_E2E_DRIVER=gpu.example.com \
PODMEDIC_E2E_POOL="$node" PODMEDIC_E2E_DEVICE="$device" \
  "$ROOT/.venv/bin/pytest" -q -m e2e "$ROOT/tests/e2e"
