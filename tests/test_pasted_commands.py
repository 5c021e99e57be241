"""A command the project prints is one a person can paste: through a real shell and then Hydra, each value arrives
as it was, a sweep job's folder (`=` and `,` in its name) included."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, entry_env
from hydra.core.override_parser.overrides_parser import OverridesParser

from transformer_attention.callbacks.analysis import ModelAnalysis
from transformer_attention.callbacks.console import pasteable
from transformer_attention.callbacks.interrupt import resume_command

SWEEP_JOB = "1_model.num_heads=2,seed=3"  # a multirun job's folder: what differs, as Hydra names it


def through_bash(args: str) -> list[str]:
    """The arguments a real shell makes of `args`."""
    out = subprocess.run(["bash", "-c", f"printf '%s\\0' {args}"], capture_output=True, check=True).stdout
    return out.decode().split("\0")[:-1]


@pytest.mark.parametrize(
    "value", ["/runs/a/checkpoints/epoch_001.ckpt", f"/runs/{SWEEP_JOB}/checkpoints/last.ckpt",
              "/my runs/it's \"best\"/x.ckpt", "C:/a b/[x]*.ckpt"],
)  # fmt: skip
def test_a_value_pasted_reaches_hydra_as_it_was(value):
    (arg,) = through_bash(pasteable("ckpt_path", value))
    override = OverridesParser.create().parse_override(arg)
    assert (override.key_or_group, override.value()) == ("ckpt_path", value)


def test_the_resume_command_of_a_sweep_job_reaches_hydra_whole():
    command = resume_command(f"/runs/{SWEEP_JOB}/checkpoints/last.ckpt")
    args = through_bash(command.removeprefix("python train.py "))
    assert OverridesParser.create().parse_override(args[-1]).value() == f"/runs/{SWEEP_JOB}/checkpoints/last.ckpt"


def test_a_skipped_analysis_command_runs_as_printed_from_a_sweep_jobs_folder(tiny_run, tmp_path):
    run, _ = tiny_run
    ckpt = next((run / "checkpoints").glob("epoch_*.ckpt"))
    job = tmp_path / "multiruns" / "2026-12-04_19-00-00-000000" / SWEEP_JOB / "checkpoints"
    job.mkdir(parents=True)
    copied = shutil.copy(ckpt, job / ckpt.name)
    command = ModelAnalysis(analyses=["heads"]).command(str(copied))
    assert command.startswith("python evaluate.py 'ckpt_path=\"") and "'analyses=[heads]'" in command
    pasted = command.replace("python", shlex.quote(sys.executable), 1) + f" paths.log_dir={tmp_path / 'outputs'}"
    proc = subprocess.run(["bash", "-c", pasted], cwd=ROOT, env=entry_env(), capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "head importance" in proc.stdout + proc.stderr
