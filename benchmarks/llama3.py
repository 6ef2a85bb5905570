"""What the Llama 3 paper published about its 16K-GPU training job's interruptions (54 days).

The goodput benchmark draws its faults in these proportions, at this rate by default: the
published goodput figures (Llama 3 ~90 %, ByteRobust 97 %) were taken at real-world rates, so a
figure taken at a much higher rate is not comparable to them.
"""

from __future__ import annotations

# Unexpected interruptions by cause (the five largest; 419 in all).
LLAMA3_MIX: dict[str, int] = {"faulty_gpu": 148, "hbm3": 72, "software": 54, "switch_cable": 35,
                              "host_maintenance": 32}
LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54
LLAMA3_INTERVAL_H = LLAMA3_DAYS * 24 / LLAMA3_INTERRUPTIONS
"""Hours between one job's unexpected interruptions: 3.09."""
