"""The goodput benchmark's model: causes, setups, scaling, stages and paired differences.

Expected values come from the sources the model cites, not from the code: Llama 3's Table 5 and its
47 planned interruptions in 54 days (arXiv 2407.21783, 3.3.4); Kubernetes' Job back-off (10 s doubling
to 6 min, kubernetes.io "Jobs") and the kubelet's (capped at 5 min, reset after 10 min running,
"Pod Lifecycle"); the default grace period, 30 s; PyTorch's NCCL timeout, 10 minutes
(``init_process_group``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from benchmarks.goodput import breakdown, combined, duration_for, mix_of, paired, reusable
from benchmarks.goodput_faults import CAUSES, INTERVAL_H, MIX, PARAMETERS, draw_faults, model_changes
from benchmarks.goodput_run import APPLICATION_XIDS, POLICIES, SCALE, Setup
from benchmarks.goodput_sensitivity import SWEEPS, sensitivity_rows, value_words
from benchmarks.goodput_stages import stage_of
from benchmarks.llama3 import LLAMA3_MIX


def test_every_cause_of_table_5_and_the_planned_ones_are_drawn_at_llama3s_rate() -> None:
    assert sum(LLAMA3_MIX.values()) == 419 and MIX["planned"] == 47
    assert set(CAUSES) == set(MIX)
    assert pytest.approx(54 * 24 / 466) == INTERVAL_H
    # One fault per job at Llama 3's rate: 2.78 real hours, at 60 real s a simulated one, 167 s.
    assert duration_for(4, jobs=4, interval_h=INTERVAL_H, scale=60.0) == pytest.approx(166.9, abs=0.1)


def test_the_causes_show_as_their_sources_say() -> None:
    # Network faults have no GPU XID; XID 48/95 end the processes (NVIDIA's memory error recovery).
    assert CAUSES["switch_cable"].xid is None and CAUSES["nic"].xid is None
    assert dict(CAUSES["switch_cable"].shows).get("hang", 0) > 0
    assert dict(CAUSES["hbm3"].shows) == {"crash": 1.0} and CAUSES["hbm3"].xid == 48
    assert dict(CAUSES["gpu_system_processor"].shows) == {"hang": 1.0} and CAUSES["gpu_system_processor"].xid == 119
    assert CAUSES["software"].xid is None  # a bug in the job is no device's fault
    assert dict(CAUSES["host_maintenance"].shows) == {"crash": 1.0}  # unplanned: not announced
    assert not APPLICATION_XIDS & {c.xid for c in CAUSES.values()}
    for cause in CAUSES.values():
        assert sum(w for _, w in cause.shows) == pytest.approx(1.0) and cause.source
        assert sum(w for _, w in cause.repair) == pytest.approx(1.0)
    draws = [CAUSES["faulty_gpu"].draw(random.Random(i))[0] for i in range(2000)]
    assert 0.45 < draws.count("hang") / len(draws) < 0.55


def test_every_parameter_has_a_source_or_says_chosen_or_a_gap() -> None:
    for name, value, source, kind in PARAMETERS:
        assert value and kind in ("documented", "chosen", "documented / chosen", "known gap"), name
        assert source or kind == "known gap", name


def test_the_faults_drawn_are_seeded_and_in_the_middle_of_the_run() -> None:
    drawn = draw_faults(20_000, seed=1, duration_s=100.0)
    total = sum(MIX.values())
    for kind, weight in MIX.items():
        assert abs(sum(1 for _, k in drawn if k == kind) / len(drawn) - weight / total) < 0.015, kind
    assert all(10.0 <= at <= 70.0 for at, _ in drawn)
    assert draw_faults(5, seed=7, duration_s=10) == draw_faults(5, seed=7, duration_s=10)


def test_kubernetes_costs_are_upstreams_scaled() -> None:
    t = Setup(jobs=4, duration_s=100).timings()
    assert t.backoff_base_s * SCALE == 10 and t.job_backoff_max_s is not None and t.job_backoff_max_s * SCALE == 360
    assert t.backoff_max_s * SCALE == 300 and t.backoff_reset_s * SCALE == 600
    assert t.termination_grace_s * SCALE == 30
    # A lost node: Unknown after --node-monitor-grace-period (50 s), its pods bound for DefaultTolerationSeconds.
    assert t.node_monitor_grace_s * SCALE == pytest.approx(50) and t.node_toleration_cap_s * SCALE == 300
    assert Setup(jobs=2, duration_s=10, ranks=4).nodes() == 2 * 4 + 2


def test_restarts_grow_with_the_nodes_as_byterobust_measured() -> None:
    # ByteRobust (arXiv 2509.16293): requeue 454 s at 2,048 GPUs and 768 s at 16,384; hot update 46 s and 65 s.
    per_node_requeue, per_node_in_place = (768 - 454) / (14336 / 8), (65 - 46) / (14336 / 8)
    one, four = Setup(jobs=1, duration_s=10), Setup(jobs=1, duration_s=10, ranks=4)
    grown = (four.timings().container_start_s - one.timings().container_start_s) * SCALE
    assert grown == pytest.approx(3 * per_node_requeue)
    in_place = (four.collectives(True)["in_job_restart_s"] - one.collectives(True)["in_job_restart_s"]) * SCALE
    assert in_place == pytest.approx(3 * per_node_in_place)


def test_the_trainer_declares_pytorchs_timeout_and_in_job_restarts_only_where_the_policy_has_them() -> None:
    plain, in_job = Setup(jobs=1, duration_s=10).collectives(False), Setup(jobs=1, duration_s=10).collectives(True)
    assert plain["collective_timeout_s"] * SCALE == 600 and "in_job_restarts" not in plain
    assert in_job["in_job_restarts"] >= 1
    # NVRx: calculated heartbeat timeout = safety_factor 5.0 x the longest gap (a 30 s checkpoint save).
    assert in_job["hang_detect_s"] * SCALE == pytest.approx(150) and "hang_detect_s" not in plain
    assert {"podmedic", "k8s-only", "in-job", "podmedic+in-job", "cordon-drain"} <= set(POLICIES)


def test_the_shipped_policys_waits_are_scaled_like_the_rest_of_the_run() -> None:
    import yaml

    from benchmarks.scaled_policy import scaled_raw
    from podmedic.domain.policy_layers import embedded_text

    shipped = yaml.safe_load(embedded_text())
    scaled = scaled_raw(yaml.safe_load(embedded_text()), 60.0)
    default, nvidia = scaled["drivers"]["default"], scaled["drivers"]["gpu.nvidia.com"]
    assert default["close"]["heal_wait_s"] == shipped["drivers"]["default"]["close"]["heal_wait_s"] / 60
    # The wait for the node agent's XID is a wait like the others: 15 s unscaled would be 15 real minutes.
    shipped_nvidia = shipped["drivers"]["gpu.nvidia.com"]
    assert nvidia["detection"]["corroborate_s"] == shipped_nvidia["detection"]["corroborate_s"] / 60
    assert default["steps"] == shipped["drivers"]["default"]["steps"]  # machines answering: not scaled


def test_an_ablation_switches_one_mechanism_off_and_is_paired_with_podmedic() -> None:
    # podmedic-no-hang: the shipped policy with checkpoint.hang_s 0, which the scaling keeps 0 (off),
    # not the 0.05 s floor every other wait gets; run only when named, and paired seed by seed.
    from benchmarks.commands import ABLATION_CHOICES, POLICY_CHOICES
    from benchmarks.goodput import KNOWN, PAIRS, RUN
    from benchmarks.goodput_run import ABLATIONS
    from benchmarks.scaled_policy import shipped_policy_scaled

    off = shipped_policy_scaled(60.0, changed=ABLATIONS["podmedic-no-hang"])
    on = shipped_policy_scaled(60.0)
    assert off.for_driver("gpu.nvidia.com").checkpoint.hang_s == 0.0
    assert on.for_driver("gpu.nvidia.com").checkpoint.hang_s == pytest.approx(60.0 / 60)
    assert (RUN, tuple(ABLATIONS)) == (POLICY_CHOICES, ABLATION_CHOICES) and (*RUN, *ABLATIONS) == KNOWN
    assert ("podmedic", "podmedic-no-hang") in PAIRS and ("podmedic", "podmedic-no-stall") in PAIRS
    # podmedic-no-stall: detection.stall.after_s 0, kept 0 by the scaling; on, the shipped 300 s scaled.
    assert shipped_policy_scaled(60.0, changed=ABLATIONS["podmedic-no-stall"]).for_driver(
        "gpu.nvidia.com").detection.stall.after_s == 0.0
    assert on.for_driver("gpu.nvidia.com").detection.stall.after_s == pytest.approx(300.0 / 60)
    assert paired([{"policy": "podmedic", "runs": [{"seed": 1, "effective_training_ratio": 0.95}]},
                   {"policy": "podmedic-no-hang", "runs": [{"seed": 1, "effective_training_ratio": 0.9}]}]) == [
        {"policy": "podmedic", "baseline": "podmedic-no-hang", "difference": 0.05, "ci95": 0.0, "seeds": 1}]


def _pod(**fields: object) -> dict[str, object]:
    return {"deleting": False, "phase": "Running", "node": "node-0000", "waiting": "", **fields}


def test_a_stalled_job_is_charged_to_what_holds_it() -> None:
    assert stage_of({"hung_ranks": 1}, [_pod()], 1) == "hung"
    assert stage_of({"restarting_in_job": True}, [_pod()], 1) == "in-job restart"
    assert stage_of({}, [_pod(deleting=True)], 1) == "termination"
    assert stage_of({}, [_pod(node_down=True)], 1) == "node lost"  # bound to a dead node, not yet evicted
    # evicted from the dead node (Terminating there until it is back) and replaced: the replacement holds it
    assert stage_of({}, [_pod(deleting=True, node_down=True), _pod(phase="Pending", node=None)], 1) == "scheduling"
    assert stage_of({}, [_pod(phase="Failed")], 1) == "back-off"  # its replacement not made yet
    assert stage_of({}, [_pod(waiting="CrashLoopBackOff")], 1) == "back-off"
    assert stage_of({}, [_pod(phase="Pending", node=None)], 1) == "scheduling"
    assert stage_of({}, [_pod(phase="Pending")], 1) == "start-up"


def _run(seed: int, ratio: float, stalled: dict[str, dict[str, float]] | None = None) -> dict[str, object]:
    return {"seed": seed, "effective_training_ratio": ratio, "faults_hit": 2, "gpu_hours_lost": 1.0,
            "lost_work_gpu_min": 20.0, "stalled_gpu_min": stalled or {}}


def test_differences_are_paired_by_seed() -> None:
    policies = [{"policy": "podmedic", "runs": [_run(1, 0.9), _run(2, 0.8)]},
                {"policy": "k8s-only", "runs": [_run(2, 0.7), _run(1, 0.85), _run(3, 0.1)]}]
    [d] = paired(policies)
    assert (d["policy"], d["baseline"], d["seeds"]) == ("podmedic", "k8s-only", 2)
    assert d["difference"] == pytest.approx(0.075) and d["ci95"] > 0


def test_the_breakdown_splits_each_interruptions_loss_and_the_rest_is_slow() -> None:
    found = breakdown([_run(1, 0.9, {"faulty_gpu": {"hung": 30.0, "start-up": 4.0}})])
    per = found["per_interruption_by_stage"]
    assert per["hung"] == 15.0 and per["start-up"] == 2.0 and per["lost work"] == 10.0
    assert per["slow, other"] == pytest.approx((60 - 54) / 2)
    assert found["stalled_by_cause"] == {"faulty_gpu": 34.0}


def test_reuse_keeps_other_seeds_and_refuses_another_setup() -> None:
    setup = Setup(jobs=2, duration_s=46.0, ranks=4, jobset=True)
    earlier = {"jobs": 2, "ranks": 4, "jobset": True, "faults": 2, "duration_s": 46.0,
               "collective_timeout_real_s": 600.0, "parameters": [list(p) for p in PARAMETERS],
               "policies": [{"policy": p, "runs": [{"seed": 1}, {"seed": 2}]} for p in ("podmedic", "k8s-only")]}
    kept = reusable(earlier, setup, 2, ("podmedic",), [2])
    assert kept == {"podmedic": [{"seed": 1}], "k8s-only": [{"seed": 1}, {"seed": 2}]}
    with pytest.raises(ValueError, match="faults"):
        reusable(earlier, setup, 3, ("podmedic",), [2])
    # Seeds measured on another model are not merged with this one's: one parameter changed is enough.
    older = [list(p) for p in PARAMETERS]
    older[0][1] = "another rate"
    with pytest.raises(ValueError, match=r"another model .*interruptions per job"):
        reusable({**earlier, "parameters": older}, setup, 2, ("podmedic",), [2])
    assert model_changes([list(p) for p in PARAMETERS]) == []
    # A targeted run (--cause) is another setup: never merged into the table of Llama 3's whole mix.
    with pytest.raises(ValueError, match="causes"):
        reusable(earlier, Setup(jobs=2, duration_s=46.0, ranks=4, jobset=True, causes=("nccl_watchdog",)), 2, (), [])
    # JobSets that restart in place are another setup too; a file written before the field measured JobSets
    # that recreate their Jobs.
    with pytest.raises(ValueError, match="in_place_restart"):
        reusable(earlier, Setup(jobs=2, duration_s=46.0, ranks=4, jobset=True, in_place_restart=True), 2, (), [])
    assert reusable({**earlier, "in_place_restart": True},
                    Setup(jobs=2, duration_s=46.0, ranks=4, jobset=True, in_place_restart=True), 2, (), [])


def test_a_targeted_run_draws_only_its_causes_in_their_own_proportions() -> None:
    drawn = draw_faults(10_000, seed=3, duration_s=100.0, causes=("nccl_watchdog", "nic"))
    share = sum(1 for _, k in drawn if k == "nic") / len(drawn)
    assert {k for _, k in drawn} == {"nccl_watchdog", "nic"}
    assert abs(share - MIX["nic"] / (MIX["nic"] + MIX["nccl_watchdog"])) < 0.02, share


def test_files_measured_side_by_side_combine_into_one_table() -> None:
    # Seeds measured by two processes at once (--merge-from): every run of either, a later file's run
    # of a policy and seed in place of an earlier one's; another setup is refused as --merge refuses it.
    setup = Setup(jobs=2, ranks=4, jobset=True, duration_s=46.0)
    head = {"jobs": 2, "ranks": 4, "jobset": True, "faults": 2, "duration_s": 46.0,
            "collective_timeout_real_s": 600.0, "parameters": [list(p) for p in PARAMETERS]}
    first = {**head, "policies": [{"policy": "podmedic", "runs": [{"seed": 1, "v": "a"}, {"seed": 2, "v": "a"}]}]}
    second = {**head, "policies": [{"policy": "podmedic", "runs": [{"seed": 2, "v": "b"}, {"seed": 3, "v": "b"}]},
                                   {"policy": "control", "runs": [{"seed": 3, "v": "b"}]}]}
    both = combined([first, second], setup, 2)
    assert both is not None
    assert reusable(both, setup, 2, (), []) == {
        "podmedic": [{"seed": 1, "v": "a"}, {"seed": 2, "v": "b"}, {"seed": 3, "v": "b"}],
        "control": [{"seed": 3, "v": "b"}]}
    assert combined([], setup, 2) is None
    with pytest.raises(ValueError, match="jobs"):
        combined([first, {**second, "jobs": 3}], setup, 2)


def test_a_sensitivity_table_lists_the_base_and_each_value() -> None:
    def point(value: object, base: bool) -> dict[str, object]:
        return {"value": value, "base": base, "policies": [
            {"policy": p, "effective_training_ratio": 0.9, "ci95": 0.01, "gpu_min_lost_per_interruption": 7.0}
            for p in ("podmedic", "k8s-only", "in-job")]}

    rows = sensitivity_rows("collective_timeout_real_s", [point(600.0, True), point(1800.0, False)])
    assert [r[0] for r in rows] == ["10 (base)", "30"] and rows[0][1] == "90.0 % ± 1.0 (7 min)"
    assert value_words("checkpoint_save_real_s", 120.0) == "120"
    assert set(SWEEPS) == {"collective_timeout_real_s", "checkpoint_save_real_s"}


def test_the_mix_counts_every_seeds_draw_once_merged_seeds_too() -> None:
    # A table measured a few seeds at a time (--merge) reports the faults of all its seeds, each seed's
    # draw once however many policies ran it.
    one, two = draw_faults(4, 1, 600.0), draw_faults(4, 2, 600.0)
    runs = {"podmedic": [{"seed": 1, "faults_drawn": one}, {"seed": 2, "faults_drawn": two}],
            "k8s-only": [{"seed": 1, "faults_drawn": one}, {"seed": 2, "faults_drawn": two}],
            "control": [{"seed": 2, "faults_drawn": two}]}
    expected: dict[str, int] = {}
    for _, kind in [*one, *two]:
        expected[kind] = expected.get(kind, 0) + 1
    assert mix_of(runs) == expected and sum(expected.values()) == 8


def test_the_report_labels_a_table_measured_on_another_model() -> None:
    from benchmarks.report_doc import _goodput

    on_file = json.loads((Path(__file__).parents[2] / "bench/results/goodput.json").read_text())
    current = {**on_file, "parameters": [list(p) for p in PARAMETERS]}
    assert not _goodput(current)[0].startswith("**Measured on an earlier model")
    older = [list(p) for p in PARAMETERS]
    older[1][1] = "another mix"
    label = _goodput({**on_file, "parameters": older})[0]
    assert label.startswith("**Measured on an earlier model") and "causes and their counts" in label
