"""The goodput benchmark's setups: the Llama 3 job shape, the announced share, the sensitivity sweeps.

The shape is Llama 3's ("The Llama 3 Herd of Models", section 3.3: synchronous training on nodes of
8 GPUs); Kubernetes' default grace period is 30 s (kubernetes.io, "Pod Lifecycle").
"""

from __future__ import annotations

import random

from benchmarks.goodput_faults import KINDS
from benchmarks.goodput_run import SCALE, Setup, _announced
from benchmarks.goodput_sensitivity import SWEEPS, sensitivity_rows, value_words


def test_single_gpu_jobs_pack_four_to_a_node_and_keep_the_benchmark_grace() -> None:
    setup = Setup(jobs=32, duration_s=90.0)
    assert not setup.llama3_shape and setup.nodes() == 9
    assert setup.timings().termination_grace_s == 0.05  # as the published single-GPU runs had it


def test_the_llama3_shape_gives_each_rank_a_node_two_spare_and_room_for_a_sigterm_save() -> None:
    setup = Setup(jobs=2, duration_s=45.0, pods_per_job=4)
    assert setup.llama3_shape and setup.nodes() == 2 * 4 + 2
    timings = setup.timings()
    assert timings.termination_grace_s == 30.0 / SCALE
    assert timings.checkpoint_save_s == 30.0 / SCALE  # the assumed save fits the default grace exactly
    assert setup.with_(checkpoint_save_real_s=120.0).timings().checkpoint_save_s > timings.termination_grace_s


def test_only_host_maintenance_is_announced_unless_a_share_is_set() -> None:
    rng = random.Random(1)
    assert _announced(KINDS["host_maintenance"], None, rng)
    assert not _announced(KINDS["faulty_gpu"], None, rng)
    assert not _announced(KINDS["host_maintenance"], 0.0, rng)  # a share of 0 announces nothing at all
    assert not any(_announced(KINDS["nic"], 1.0, rng) for _ in range(10))  # what no device reports, never
    shares = [_announced(KINDS["hbm3"], 0.5, rng) for _ in range(2000)]
    assert 0.45 < sum(shares) / len(shares) < 0.55


def test_a_sensitivity_table_lists_the_base_and_each_value_in_order() -> None:
    def point(value: object, base: bool, ratio: float) -> dict[str, object]:
        return {"value": value, "base": base, "policies": [
            {"policy": p, "effective_training_ratio": ratio, "ci95": 0.01, "gpu_min_lost_per_interruption": 7.0}
            for p in ("podmedic", "k8s-only", "cordon-drain")]}

    rows = sensitivity_rows("repair_s", [point(5.0, False, 0.97), point(15.0, True, 0.96), point(60.0, False, 0.9)])
    assert [r[0] for r in rows] == ["5", "15 (base)", "60"]  # simulated seconds read as real minutes
    assert rows[2][1] == "90.0 % ± 1.0 (7 min)"
    assert value_words("warn_share", None) == "host maintenance only (documented)"
    assert value_words("warn_share", 0.5) == "50 %"
    assert set(SWEEPS) == {"repair_s", "warn_share", "checkpoint_save_real_s"}


def test_the_shipped_policys_waits_are_scaled_like_the_rest_of_the_run() -> None:
    # The shipped values are read from the embedded policy with plain YAML here.
    import yaml

    from benchmarks.scaled_policy import scaled_raw
    from podmedic.domain.policy_layers import embedded_text

    shipped = yaml.safe_load(embedded_text())
    scaled = scaled_raw(yaml.safe_load(embedded_text()), 60.0)
    default, nvidia = scaled["drivers"]["default"], scaled["drivers"]["gpu.nvidia.com"]
    assert default["close"]["heal_wait_s"] == shipped["drivers"]["default"]["close"]["heal_wait_s"] / 60
    assert nvidia["checkpoint"]["timeout_s"] == shipped["drivers"]["gpu.nvidia.com"]["checkpoint"]["timeout_s"] / 60
    assert [r["timeout_s"] for r in default["recovery"]["transient"]] == [
        r["timeout_s"] / 60 for r in shipped["drivers"]["default"]["recovery"]["transient"]]
    assert scaled["guard"]["storm"]["clear_s"] == shipped["guard"]["storm"]["clear_s"] / 60
    # Machines answering are not scaled: the activities' limits and the wait for the node agent's XID.
    assert default["steps"] == shipped["drivers"]["default"]["steps"]
    assert nvidia["detection"]["corroborate_s"] == shipped["drivers"]["gpu.nvidia.com"]["detection"]["corroborate_s"]
    assert default["checkpoint"]["poll_s"] == 0.05  # 1 s / 60, floored


def test_reuse_takes_the_other_policies_runs_only_from_the_same_setup() -> None:
    import pytest

    from benchmarks.goodput import reusable

    setup = Setup(jobs=2, duration_s=46.0, pods_per_job=4)
    earlier = {"jobs": 2, "pods_per_job": 4, "faults": 4, "seeds": [1, 2], "duration_s": 46.0, "repair_s": 15.0,
               "policies": [{"policy": p, "runs": [p]} for p in ("podmedic", "k8s-only", "cordon-drain")]}
    assert reusable(earlier, setup, 4, [1, 2], ("podmedic",)) == {"k8s-only": ["k8s-only"],
                                                                  "cordon-drain": ["cordon-drain"]}
    with pytest.raises(ValueError, match="seeds"):
        reusable(earlier, setup, 4, [1, 2, 3], ("podmedic",))
