"""What the Llama 3 paper published about its 16K-GPU training job's interruptions (54 days).

"The Llama 3 Herd of Models" (Meta, 2024), Table 5: root causes of the 419 unexpected
interruptions of a 54-day snapshot of Llama 3 405B pre-training on 16,384 H100 GPUs. The goodput
benchmark draws its faults in these proportions, at this rate by default: the published goodput
figures (Llama 3 ~90 %, ByteRobust 97 %) were taken at real-world rates, so a figure taken at a
much higher rate is not comparable to them.
"""

from __future__ import annotations

# Every cause of Table 5, with its count (419 in all).
LLAMA3_MIX: dict[str, int] = {
    "faulty_gpu": 148, "hbm3": 72, "software": 54, "switch_cable": 35, "host_maintenance": 32,
    "gpu_sram": 19, "gpu_system_processor": 17, "nic": 7, "nccl_watchdog": 7, "silent_data_corruption": 6,
    "gpu_thermal": 6, "ssd": 3, "power_supply": 3, "server_chassis": 2, "io_expansion_board": 2,
    "dependency": 2, "cpu": 2, "system_memory": 2,
}
LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54
LLAMA3_INTERVAL_H = LLAMA3_DAYS * 24 / LLAMA3_INTERRUPTIONS
"""Hours between one job's unexpected interruptions: 3.09."""
