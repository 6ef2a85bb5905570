"""A policy file is laid over the embedded default policy: what it does not mention stays as shipped.

The expected values are read from ``podmedic/domain/default_policy.yaml`` with plain YAML here, not
through the code under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import podmedic.domain
from podmedic.domain.policy_checks import policy_warnings
from podmedic.domain.policy_file import PolicyError, load_policy, load_policy_layers

SHIPPED: dict[str, Any] = yaml.safe_load(
    Path(podmedic.domain.__file__).with_name("default_policy.yaml").read_text())
NVIDIA = SHIPPED["drivers"]["gpu.nvidia.com"]


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    return path


def test_a_file_that_sets_one_knob_keeps_the_guard_and_the_xid_table(tmp_path: Path) -> None:
    policies = load_policy(_file(tmp_path, "drivers:\n  gpu.nvidia.com:\n    checkpoint: {timeout_s: 300}\n"))
    nvidia = policies.for_driver("gpu.nvidia.com")
    assert nvidia.checkpoint.timeout_s == 300
    assert policies.guard is not None and policies.guard.enabled
    assert policies.guard.max_devices_tainted == SHIPPED["guard"]["max_devices_tainted"]
    assert list(nvidia.classification.codes.permanent) == NVIDIA["classification"]["codes"]["permanent"]
    assert 79 in nvidia.classification.codes.permanent  # fallen off the bus stays permanent
    assert nvidia.detection.corroborate_s == NVIDIA["detection"]["corroborate_s"]
    # The rest of the entry is the shipped default's.
    assert nvidia.close.heal_wait_s == SHIPPED["drivers"]["default"]["close"]["heal_wait_s"]


def test_removing_is_explicit(tmp_path: Path) -> None:
    policies = load_policy(_file(tmp_path, "guard: {enabled: false}\ndrivers:\n  gpu.nvidia.com:\n"
                                           "    classification: {codes: {permanent: []}}\n"))
    assert policies.guard is not None and not policies.guard.enabled
    codes = policies.for_driver("gpu.nvidia.com").classification.codes
    assert codes.permanent == () and list(codes.container_code) == NVIDIA["classification"]["codes"]["container_code"]


@pytest.mark.parametrize(("text", "where"), [
    ("guard:\ndrivers: {default: {}}\n", "guard"),
    ("drivers:\n", "drivers"),
])
def test_an_empty_section_is_refused_with_what_to_write(tmp_path: Path, text: str, where: str) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(_file(tmp_path, text))
    assert [path for path, _ in caught.value.errors] == [where]
    assert str(tmp_path / "policy.yaml") == caught.value.source


def test_an_error_names_the_field_in_the_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(_file(tmp_path, "drivers:\n  gpu.nvidia.com:\n    checkpoint: {timeout_s: -1}\n"))
    assert [path for path, _ in caught.value.errors] == ["drivers.gpu.nvidia.com.checkpoint.timeout_s"]


def test_a_new_driver_gets_the_default_entry_with_the_files_default_over_it(tmp_path: Path) -> None:
    policies = load_policy(_file(tmp_path, "drivers:\n  default:\n    close: {poll_s: 7}\n  tpu.google.com: {}\n"))
    tpu = policies.for_driver("tpu.google.com")
    assert tpu.close.poll_s == 7
    assert tpu.close.heal_wait_s == SHIPPED["drivers"]["default"]["close"]["heal_wait_s"]


def _warnings(tmp_path: Path, text: str) -> list[tuple[str, str]]:
    layers = load_policy_layers(_file(tmp_path, text))
    return policy_warnings(layers.policies.drivers, layers.user, layers.embedded)


def test_validate_names_what_parses_but_looks_wrong(tmp_path: Path) -> None:
    warnings = dict(_warnings(tmp_path, "drivers:\n  gpu.nvidai.com: {}\n  gpu.nvidia.com:\n"
                                        "    classification: {codes: {ignore: [79, 109]}}\n"
                                        "    steps: {checkpoint: {start_to_close_s: 5}}\n"
                                        "  default:\n    checkpoint: {timeout_s: 30}\n"))
    assert "did you mean gpu.nvidia.com?" in warnings["drivers.gpu.nvidai.com"]
    assert warnings["drivers.gpu.nvidia.com.classification.codes"] == "code 79 is listed in permanent and ignore"
    assert "shorter than heartbeat_s 15" in warnings["drivers.gpu.nvidia.com.steps.checkpoint"]
    assert warnings["drivers.default.checkpoint.timeout_s"].startswith("gpu.nvidia.com keep(s)")


def test_the_embedded_policy_alone_warns_of_nothing() -> None:
    layers = load_policy_layers(None)
    assert policy_warnings(layers.policies.drivers, layers.user, layers.embedded) == []


def _podmedic(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workers.cli.main", *args], capture_output=True, text=True,
                          check=False)


def test_policy_show_prints_the_policy_in_force_with_each_values_origin(tmp_path: Path) -> None:
    path = _file(tmp_path, "drivers:\n  gpu.nvidia.com:\n    checkpoint: {timeout_s: 300}\n")
    shown = _podmedic("policy", "show", str(path))
    assert shown.returncode == 0, shown.stderr
    as_json = json.loads(_podmedic("policy", "show", str(path), "-o", "json").stdout)
    origins = as_json.pop("origins")
    assert yaml.safe_load(shown.stdout) == as_json  # the YAML is valid, its comments aside
    assert origins["drivers.gpu.nvidia.com.checkpoint.timeout_s"] == f"{path} (drivers.gpu.nvidia.com)"
    assert origins["drivers.gpu.nvidia.com.detection.corroborate_s"] == \
        "embedded default policy (drivers.gpu.nvidia.com)"
    assert origins["guard.max_devices_tainted"] == "embedded default policy (guard)"
    assert f"timeout_s: 300.0  # {path} (drivers.gpu.nvidia.com)" in shown.stdout


def test_policy_validate_prints_warnings_and_accepts(tmp_path: Path) -> None:
    done = _podmedic("policy", "validate", str(_file(tmp_path, "drivers:\n  gpu.nvidai.com: {}\n")))
    assert done.returncode == 0
    assert "WARNING drivers.gpu.nvidai.com: not a known driver: did you mean gpu.nvidia.com?" in done.stderr
    assert "1 warning(s)" in done.stdout
