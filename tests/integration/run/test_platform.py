"""GPU detection with a stand-in nvidia-smi on PATH that prints output recorded from real drivers
(the -L listing, the query CSV and the banner). No GPU here."""

from __future__ import annotations

import stat
from pathlib import Path

from autotest.inputs.case import load_case
from autotest.run.platform import check_platform, detect_gpus
from tests.unit.run.test_platform import BANNER, LISTING


def fake_smi(tmp_path: Path, *, fail: bool = False) -> dict[str, str]:
    """A PATH holding only a stand-in nvidia-smi (plus the system tools it needs)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "listing.txt").write_text(LISTING)
    (tmp_path / "banner.txt").write_text(BANNER)
    body = ('echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver." >&2\n'
            "exit 9\n") if fail else (
        f'case "$1" in\n  -L) cat {tmp_path}/listing.txt ;;\n'
        '  --query-gpu=*) printf "550.54.15\\n550.54.15\\n550.54.15\\n" ;;\n'
        f"  *) cat {tmp_path}/banner.txt ;;\nesac\n")
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


def test_nvidia_smi_listing_details_and_visible_devices(tmp_path: Path) -> None:
    env = fake_smi(tmp_path)
    info = detect_gpus(env, details=True)
    assert (info.count, info.source, info.driver, info.cuda) == (3, "nvidia-smi", "550.54.15", "12.4")
    capped = detect_gpus({**env, "CUDA_VISIBLE_DEVICES": "0,2"})
    assert capped.count == 2 and "CUDA_VISIBLE_DEVICES" in capped.source
    assert detect_gpus({**env, "CUDA_VISIBLE_DEVICES": ""}).count == 0


def test_nvidia_smi_failure_is_a_reason(tmp_path: Path) -> None:
    info = detect_gpus(fake_smi(tmp_path, fail=True))
    assert info.count == 0
    assert info.source == ("nvidia-smi failed: NVIDIA-SMI has failed because it couldn't "
                           "communicate with the NVIDIA driver.")


def test_gpu_case_counts_real_listing(tmp_path: Path) -> None:
    case = load_case("grpo-gsm8k-qwen3-8b-lmdeploy")
    check = check_platform(case, {**fake_smi(tmp_path), "XTUNER_ROOT": str(tmp_path)})
    assert check.skip_reason == "needs 8 GPUs, found 3 (nvidia-smi)"
