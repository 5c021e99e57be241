"""A command the project prints is one a person can paste: through a real shell and then Hydra, each value arrives
as it was, a sweep job's folder (`=` and `,` in its name) included; and pasted back into bash in the folder it
was printed in, each runs: a sweep job's resume line, a sweep's and an IMDB-shaped run's skipped-analysis lines
(train's resume line: test_resume.py; the lines of a stopped evaluate.py or test: test_analysis_signal.py)."""

from __future__ import annotations

import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import ROOT, TINY, entry_env, run_warm
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import open_dict

from transformer_attention.callbacks.analysis import ModelAnalysis
from transformer_attention.callbacks.console import pasteable
from transformer_attention.callbacks.interrupt import evaluate_command, resume_command

SWEEP_JOB = "1_model.num_heads=2,seed=3"  # a multirun job's folder: what differs, as Hydra names it


def through_bash(args: str, cwd: Path | None = None) -> list[str]:
    """The arguments a real shell makes of `args` (in `cwd`, where a pattern would match files)."""
    out = subprocess.run(["bash", "-c", f"printf '%s\\0' {args}"], cwd=cwd, capture_output=True, check=True).stdout
    return out.decode().split("\0")[:-1]


def test_a_long_command_printed_on_lines_is_the_same_command():
    """evaluate_command with a width: the checkpoint on the first line, the overrides on lines of at most that many
    characters, each line but the last continued with a backslash; a shell reads the same words as from one line."""
    ckpt = f"outputs/train/multiruns/{SWEEP_JOB}/checkpoints/epoch_004.ckpt"
    overrides = ("analyses=[heads,faithfulness]", "analysis.split=validation", "seed=3", "analysis.samples=50")
    one, lines = evaluate_command(ckpt, *overrides), evaluate_command(ckpt, *overrides, width=60)
    rows = lines.splitlines()
    assert len(rows) > 2 and all(r.endswith(" \\") for r in rows[:-1]) and not rows[-1].endswith("\\")
    assert rows[0] == f"python evaluate.py {pasteable('ckpt_path', ckpt)} \\" and all(len(r) <= 62 for r in rows[1:])
    assert through_bash(lines) == through_bash(one) and through_bash(one)[2].startswith("ckpt_path=")
    assert evaluate_command(ckpt, *overrides, width=1000) == one


@pytest.mark.parametrize(
    "value", ["/runs/a/checkpoints/epoch_001.ckpt", f"/runs/{SWEEP_JOB}/checkpoints/last.ckpt",
              "/my runs/it's \"best\"/x.ckpt", "C:/a b/[x]*.ckpt"],
)  # fmt: skip
def test_a_value_pasted_reaches_hydra_as_it_was(value):
    (arg,) = through_bash(pasteable("ckpt_path", value))
    override = OverridesParser.create().parse_override(arg)
    assert (override.key_or_group, override.value()) == ("ckpt_path", value)


def test_the_resume_command_of_a_sweep_job_reaches_hydra_whole(monkeypatch):
    from hydra.core.hydra_config import HydraConfig

    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)  # no Hydra run left set up by another test in-process
    command = resume_command(f"/runs/{SWEEP_JOB}/checkpoints/last.ckpt")
    assert command.startswith("python train.py ")
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


def printed_command(output: str, after: str) -> str:
    """The last command printed from the line after one ending with `after` (`resume with:`, `to run it:`)."""
    return printed_commands(output, after)[-1]


def printed_commands(output: str, after: str) -> list[str]:
    """Each command printed from the line after one ending with `after`, with the lines it continues onto (each but
    the last ending with a backslash), as printed: bash reads them as one."""
    lines = output.splitlines()
    found = []
    for i, line in enumerate(lines[:-1]):
        if line.rstrip().endswith(after):
            end = i + 1
            while lines[end].endswith("\\") and end + 1 < len(lines):
                end += 1
            found.append("\n".join(lines[i + 1 : end + 1]).strip())
    assert found, f"no line ending with {after!r} in:\n{output[-3000:]}"
    return found


def paste(command: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """`command` as printed, pasted into bash in `cwd`: the words bash makes of it are the command line of
    `python <entry>.py` (this interpreter and the repository's entry, started warm: conftest's run_warm)."""
    words = through_bash(command, cwd)
    assert words[0] == "python" and re.fullmatch(r"\w+\.py", words[1]), (command, words)
    return run_warm(words[1], *words[2:], cwd=cwd, timeout=timeout, check=False)


SKIP_ANALYSIS = ["callbacks.model_analysis.max_cost=0.0001", "callbacks.model_analysis.analyses=[heads]"]


@pytest.mark.slow
def test_a_sweeps_skipped_analysis_lines_run_as_printed(tmp_path: Path):
    args = [*TINY, "model.num_heads=1,2", *SKIP_ANALYSIS, "callbacks.attention_maps=null", "paths.log_dir=outputs"]
    sweep = run_warm("train.py", "-m", *args, cwd=tmp_path)
    output = sweep.stdout + sweep.stderr
    commands = printed_commands(output, "to run it:")
    assert len(commands) == 2 and all("0_model" in c or "1_model" in c for c in commands), commands
    pasted = paste(commands[-1], tmp_path)  # the second job's: its folder's name holds = and ,
    assert pasted.returncode == 0, pasted.stderr[-3000:]
    assert "head importance" in pasted.stdout and "was trained on" not in pasted.stdout + pasted.stderr


def write_imdb_shaped(folder: Path) -> Path:
    """Train and test parquet files (`text`, `label`), no validation split: it is carved from train, as IMDB's."""
    rng = random.Random(0)
    words = {
        1: "fine warm great fun moving lovely clever wonderful".split(),
        0: "dull silly poor bad boring flat".split(),
    }
    filler = "the a film story plot acting cast script scene movie and with of it was".split()
    folder.mkdir()
    for split, n in (("train", 240), ("test", 60)):
        texts = [[*rng.choices(filler, k=10), *rng.choices(words[i % 2], k=3)] for i in range(n)]
        for text in texts:
            rng.shuffle(text)
        pd.DataFrame({"text": [" ".join(t) for t in texts], "label": [i % 2 for i in range(n)]}).to_parquet(
            folder / f"{split}.parquet"
        )
    return folder


@pytest.mark.slow
def test_the_skipped_analysis_line_of_an_imdb_shaped_run_runs_as_printed(tmp_path: Path):
    """The IMDB recipe (data set, length and validation split from its experiment and `data.path`) made small: the
    printed evaluate.py command tests the checkpoint on the data and length it was trained on."""
    data = write_imdb_shaped(tmp_path / "imdb")
    small = ["model.init_from=null", "model.ngram_buckets=0", "model.d_model=16", "model.dim_feedforward=32"]
    args = ["experiment=imdb", "data.path=imdb", *small, "data.max_length=40", "trainer.max_epochs=1"]
    args += ["trainer.enable_progress_bar=false", "callbacks.attention_maps=null", *SKIP_ANALYSIS]
    trained = run_warm("train.py", *args, "paths.log_dir=outputs", cwd=tmp_path)
    command = printed_command(trained.stdout + trained.stderr, "to run it:")
    assert "data" not in command.split("ckpt_path", 1)[1].split(" ", 1)[1]  # the checkpoint records its data
    pasted = paste(command, tmp_path)
    assert pasted.returncode == 0, pasted.stderr[-3000:]
    said = pasted.stdout + pasted.stderr
    assert f"data {data}" in said and "was trained on" not in said  # its own files, at its own length
    assert "head importance" in pasted.stdout
    tested = re.search(r"^\s+test/loss\s+(\S+)$", pasted.stdout, flags=re.M)
    assert tested and tested.group(1) == re.search(r"^\s+test/loss\s+(\S+)$", trained.stdout, flags=re.M).group(1)


def test_the_resume_line_of_an_optuna_trial_is_one_run(tmp_path: Path):
    """A trial's job holds the sweep's overrides (`hparams_search=optuna` makes any command a sweep): its resume
    line keeps the trial's values and drops what makes a sweep, so pasted it resumes that one run."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    trial = ["model.d_model=64", "model.num_heads=4", "hparams_search=optuna", "hydra.sweeper.n_trials=3"]
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose("train", overrides=[*trial, "seed=3"], return_hydra_config=True)
            with open_dict(cfg):
                cfg.hydra.job.name = "train"
            HydraConfig.instance().set_config(cfg)
            command = resume_command(f"/runs/optuna/train/{SWEEP_JOB}/checkpoints/last.ckpt")
    finally:
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None  # type: ignore[assignment]  # no Hydra run for the tests after this one
    assert command.startswith("python train.py ")
    args = through_bash(command.removeprefix("python train.py "))
    assert args == [
        "model.d_model=64",
        "model.num_heads=4",
        "seed=3",
        f'ckpt_path="/runs/optuna/train/{SWEEP_JOB}/checkpoints/last.ckpt"',
    ]


@pytest.mark.slow
def test_the_resume_line_of_a_stopped_sweep_job_runs_as_printed(tmp_path: Path):
    from test_resume import RESUMABLE, SLOW_TRAIN, interrupt_mid_training

    script = tmp_path / "slow_train.py"
    script.write_text(SLOW_TRAIN.format(delay=0.3, train=str(ROOT / "train.py")))
    overrides = ["-m", *RESUMABLE, "model.num_heads=1,2", f"paths.log_dir={tmp_path / 'outputs'}"]
    stopped = interrupt_mid_training(overrides, tmp_path, signal.SIGTERM, script=script, task="train/multiruns/*")
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stderr[-3000:]
    command = printed_command(stopped.stdout + stopped.stderr, "resume with:")
    assert " -m" not in command and "model.num_heads=1 " in command  # the job's own value: one run
    resumed = paste(command, tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Restored all states from the checkpoint" in resumed.stdout + resumed.stderr
    (job,) = [p for p in (tmp_path / "outputs" / "train" / "multiruns").glob("*/0_*")]
    assert (job / "metrics.json").is_file()  # it went on in the job's folder
