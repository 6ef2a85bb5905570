#!/usr/bin/env bash
# Runs the NVML node agent on a real NVIDIA GPU machine and keeps what it reported.
#
#   OUT=/tmp/nvml-check bash deploy/gpu-check/run.sh
#
# 1. `podmedic agent nvml --once`: each GPU's present state as CloudEvents (once.json);
# 2. the agent's posting loop against a capturing stand-in for the ingest, with degradation
#    thresholds lowered below the GPU's idle readings (policy-low-thresholds.yaml) so that
#    real readings cross them: what reaches the ingest over HTTP (posted.json, agent.log).
# Needs python3 with nvidia-ml-py, aiohttp, pyyaml and pydantic importable.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/nvml-check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
here=deploy/gpu-check

{ nvidia-smi --query-gpu=index,name,uuid,driver_version,temperature.gpu,power.draw,ecc.errors.corrected.volatile.total \
    --format=csv || true; } >"$OUT/nvidia-smi.csv"
"$PY" -c 'import pynvml; pynvml.nvmlInit(); print("NVML", pynvml.nvmlSystemGetNVMLVersion(), "driver", pynvml.nvmlSystemGetDriverVersion())' \
    >"$OUT/versions.txt"

"$PY" -m workers.cli.agent nvml --once --node gpu-check-node >"$OUT/once.json"

"$PY" "$here/capture.py" 18188 "$OUT/posted.json" &
capture=$!
sleep 1
PODMEDIC_INGEST_TOKEN=gpu-check timeout -s TERM 25 "$PY" -m workers.cli.agent nvml --node gpu-check-node \
    --ingest-url http://127.0.0.1:18188 --interval 2 --report-interval 10 \
    --policy "$here/policy-low-thresholds.yaml" >"$OUT/agent.log" 2>&1 || true
sleep 1
kill "$capture" 2>/dev/null || true
wait "$capture" 2>/dev/null || true
"$PY" - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
once = json.load(open(f"{out}/once.json"))
posted = json.load(open(f"{out}/posted.json"))
print(f"--once: {len(once)} events: " + ", ".join(f"{e['data']['device']}={e['data']['health']}" for e in once))
print(f"posted to the stand-in ingest: {len(posted)} events")
for e in posted[:12]:
    d = e["data"]
    print(f"  {d['device']:8} {d['health']:9} {d.get('reason', ''):24} {d.get('message', '')[:90]}")
EOF
