"""Multiruns, Optuna (resumed after a kill, failing trials), launchers and DDP on CPU, as a user runs them."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import torch
import yaml
from conftest import ROOT, TINY, entry_env, run_warm
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from transformer_attention.files import release_lock
from transformer_attention.sweeps.space import search_space, trial_overrides
from transformer_attention.sweeps.study import (
    SweepError,
    check_overrides,
    ended,
    fail_interrupted,
    lock_study,
    sqlite_path,
)
from transformer_attention.training import metrics as metrics_file

pytestmark = pytest.mark.slow

FAST = ["trainer.limit_train_batches=2", "trainer.limit_val_batches=1", "trainer.limit_test_batches=1"]
NO_PICTURES = ["callbacks.attention_maps=null", "callbacks.classification_report=null"]


def tiny(*drop: str) -> list[str]:
    """TINY overrides without the keys a sweep sets itself, plus a few batches only."""
    return [o for o in TINY if o.split("=")[0] not in drop] + FAST + NO_PICTURES


def sweep_dirs(log_dir: Path) -> list[Path]:
    return sorted((log_dir / "train" / "multiruns").iterdir())


def job_dir(sweep: Path, number: int) -> Path:
    """Job `number`'s folder of a grid sweep: `<number>_<its overrides>` (conf/hydra/default.yaml)."""
    (found,) = [p for p in sweep.iterdir() if p.is_dir() and p.name.split("_", 1)[0] == str(number)]
    return found


def job_config(job: Path) -> dict:
    return yaml.safe_load((job / ".hydra" / "config.yaml").read_text())


def assert_complete_job(job: Path) -> None:
    assert list((job / "checkpoints").glob("*.ckpt")), job
    assert list(job.glob("events.out.tfevents.*")), job
    assert (job / ".hydra" / "config.yaml").is_file() and (job / "config_tree.log").is_file(), job


def final_metrics(stdout: str) -> dict[str, float]:
    block = stdout.rsplit("final metrics", 1)[1]
    return {k: float(v) for k, v in re.findall(r"^\s+(\S+)\s+([-\d.eE+]+)$", block, flags=re.M)}


# ---- grid multirun ---------------------------------------------------------------------------
def test_grid_multirun_gives_every_job_its_own_folder(tmp_path: Path):
    proc = run_warm(
        "train.py",
        "-m",
        "model.num_heads=1,2",
        "model.num_layers=1,2",
        *tiny("model.num_heads", "model.num_layers"),
        f"paths.log_dir={tmp_path}",
        "tags=[grid]",
    )
    (sweep,) = sweep_dirs(tmp_path)
    jobs = [job_dir(sweep, n) for n in range(4)]
    assert len([p for p in sweep.iterdir() if p.is_dir() and not p.name.startswith(".")]) == 4
    for job in jobs:  # the folder says what the job varied: <number>_model.num_heads=..,model.num_layers=..
        model = job_config(job)["model"]
        assert f"model.num_heads={model['num_heads']},model.num_layers={model['num_layers']}" in job.name
    combos = set()
    for job in jobs:
        assert_complete_job(job)
        model = job_config(job)["model"]
        combos.add((model["num_heads"], model["num_layers"]))
        assert job_config(job)["tags"] == ["grid"]
    assert combos == {(1, 1), (1, 2), (2, 1), (2, 2)}
    assert proc.stdout.count("final metrics") == 4
    assert (sweep / "multirun.yaml").is_file()
    assert_summary(proc.stdout, sweep, jobs, varied=["model.num_heads", "model.num_layers"])


def assert_summary(stdout: str, sweep: Path, jobs: list[Path], varied: list[str], metric: str = "val/acc_best") -> None:
    """The end of a multirun: a table of its jobs, best `metric` first, printed and in <sweep>/summary.csv, each
    row with what the job tried (the overrides that differ between jobs), its metrics as its folder holds them."""
    with (sweep / "summary.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["job", "status", *varied, metric, "test/acc", "folder"]
    assert sorted(int(r["job"]) for r in rows) == sorted(int(j.name.split("_")[0]) for j in jobs)
    values = [float(r[metric]) for r in rows]
    assert values == sorted(values, reverse=True)  # best first
    for row in rows:
        job = sweep / row["folder"]
        logged = json.loads((job / "metrics.json").read_text())
        assert float(row[metric]) == pytest.approx(logged[metric], abs=1e-4)
        assert float(row["test/acc"]) == pytest.approx(logged["test/acc"], abs=1e-4)
        config = OmegaConf.create(job_config(job))
        for key in varied:
            assert row[key] == str(OmegaConf.select(config, key))
    table = stdout.split("sweep summary", 1)[1]
    lines = [line.split() for line in table.splitlines()[1:] if line.strip()][: len(rows) + 1]
    assert lines[0][:2] == ["job", "status"] and [line[0] for line in lines[1:]] == [r["job"] for r in rows]


def test_two_launches_at_once_never_share_a_folder(tmp_path: Path):
    cmd = [
        sys.executable,
        str(ROOT / "train.py"),
        "-m",
        "seed=1",
        *tiny(),
        "train=false",
        "test=false",
        "optimized_metric=null",
        f"paths.log_dir={tmp_path}",
    ]
    procs = [
        subprocess.Popen(cmd, cwd=ROOT, env=entry_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read().decode()[-3000:]
    sweeps = sweep_dirs(tmp_path)
    assert len(sweeps) == 2
    assert all((job_dir(s, 0) / ".hydra" / "config.yaml").is_file() for s in sweeps)


# ---- Optuna -----------------------------------------------------------------------------------
def load_study(log_dir: Path, name: str = "train") -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{log_dir}/train/optuna/{name}/optuna.db")


def test_optuna_sweep_of_three_trials_writes_the_best_parameters(tmp_path: Path):
    proc = run_warm(
        "train.py",
        "hparams_search=optuna",
        "hydra.sweeper.n_trials=3",
        *tiny("model.d_model", "model.num_heads", "model.num_layers"),
        f"paths.log_dir={tmp_path}",
    )
    folder = tmp_path / "train" / "optuna" / "train"
    results = yaml.safe_load((folder / "optimization_results.yaml").read_text())
    searched = {"model.d_model", "model.num_heads", "model.num_layers", "model.dropout", "model.optimizer.lr"}
    assert set(results["best_params"]) == searched
    assert 0 <= results["best_value"] <= 1
    trials = load_study(tmp_path).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    assert results["best_value"] == max(t.value for t in trials)
    for t in trials:
        assert t.params["model.d_model"] % t.params["model.num_heads"] == 0
        assert_complete_job(job_dir(folder, t.number))
        assert job_config(job_dir(folder, t.number))["model"]["d_model"] == t.params["model.d_model"]
    jobs = [job_dir(folder, t.number) for t in trials]
    assert_summary(
        proc.stdout, folder, jobs, varied=sorted(k for k in searched if len({t.params[k] for t in trials}) > 1)
    )


def test_optuna_failing_trial_is_recorded_and_the_sweep_goes_on(tmp_path: Path):
    # seed 42 proposes num_heads 3, 2, 2: the first trial fails its config check (16 % 3 != 0)
    proc = run_warm(
        "train.py",
        "hparams_search=optuna",
        "hydra.sweeper.n_trials=3",
        "seed=42",
        "model.num_heads=choice(2,3)",
        "model.dropout=0.1",
        "model.optimizer.lr=0.002",
        *tiny("model.num_heads"),
        f"paths.log_dir={tmp_path}",
        check=False,
    )  # on the command line: a choice() is searched, a plain value is fixed
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    # the sweep went on, then its end names the failed job and exits non-zero
    failed = [line for line in proc.stderr.splitlines() if line.startswith("job 0 (")]
    assert len(failed) == 1 and "model.num_heads=3" in failed[0], proc.stderr[-3000:]
    assert "failed: config error: model.d_model=16 is not divisible by model.num_heads=3" in failed[0]
    assert proc.stderr.rstrip().endswith("1 of 3 jobs failed")
    trials = load_study(tmp_path).trials
    assert [(t.params["model.num_heads"], t.state) for t in trials] == [
        (3, TrialState.FAIL),
        (2, TrialState.COMPLETE),
        (2, TrialState.COMPLETE),
    ]
    results = yaml.safe_load((tmp_path / "train" / "optuna" / "train" / "optimization_results.yaml").read_text())
    assert results["best_params"] == {"model.num_heads": 2}


def test_optuna_sweep_killed_after_its_first_trial_resumes_with_the_next(tmp_path: Path):
    # TINY fixes the model's size: the search is over dropout and learning rate
    args = ["hparams_search=optuna", "hydra.sweeper.n_trials=3", *tiny(), f"paths.log_dir={tmp_path}"]
    folder = tmp_path / "train" / "optuna" / "train"
    first = subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), *args],
        cwd=ROOT,
        env=entry_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while not (folder.exists() and any(p.name.split("_", 1)[0] == "1" for p in folder.iterdir())):
        # trial 0 is told, trial 1 has started: stop it like a preemption
        assert first.poll() is None and time.monotonic() < deadline, "the first launch ended before trial 1"
        time.sleep(0.2)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert [t.state for t in load_study(tmp_path).trials] == [TrialState.COMPLETE, TrialState.RUNNING]

    run_warm("train.py", *args)
    assert len(optuna.get_all_study_summaries(f"sqlite:///{folder}/optuna.db")) == 1  # one study, resumed
    trials = load_study(tmp_path).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE, TrialState.COMPLETE]
    assert len(ended(load_study(tmp_path))) == 3  # the configured number; the interrupted trial does not count
    assert sorted(p.name.split("_", 1)[0] for p in folder.iterdir() if p.is_dir()) == ["0", "1", "2", "3"]
    proposals = [tuple(t.params.values()) for t in trials]
    assert len(set(proposals)) == 4  # the reopened seeded sampler did not propose trials 0 and 1 again
    for t in (trials[0], trials[2], trials[3]):
        assert_complete_job(job_dir(folder, t.number))


def test_resume_helpers_on_a_stored_study(tmp_path: Path):
    storage = f"sqlite:///{tmp_path}/s/optuna.db"
    assert sqlite_path(storage) == tmp_path / "s" / "optuna.db" and sqlite_path(None) is None
    (tmp_path / "s").mkdir()
    study = optuna.create_study(study_name="s", storage=storage, direction="maximize")
    check_overrides(study, ["b=1", "a=2"])
    check_overrides(study, ["a=2", "b=1"])  # same overrides, any order: resumes
    with pytest.raises(SweepError, match=r"only now: \['b=3'\].*study_name"):
        check_overrides(study, ["a=2", "b=3"])
    study.tell(study.ask(), 0.5)
    study.ask()  # left RUNNING, as by a killed launch
    assert fail_interrupted(study) == [1]
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.FAIL]
    assert len(ended(study)) == 1
    study.tell(study.ask(), state=TrialState.FAIL)  # a trial that failed on its own counts as done
    assert len(ended(study)) == 2


def test_pruning_stops_a_hopeless_trial_and_keeps_its_folder(tmp_path: Path):
    """Trials 1 and 3 learn nothing (lr 1e-7): after their first epoch their val/acc is below the median
    of the complete trials at that epoch, so the job stops there and the study records PRUNED."""
    lrs = [0.01, 1e-7, 0.01, 1e-7]
    run_warm(
        "train.py",
        "hparams_search=optuna",
        "hydra.sweeper.n_trials=4",
        "hydra.sweeper.enqueue_trials=[" + ",".join(f"{{model.optimizer.lr: {lr}}}" for lr in lrs) + "]",
        "hydra.sweeper.pruner.n_startup_trials=1",
        "hydra.sweeper.pruner.n_warmup_steps=0",
        "model.dropout=0.0",
        "model.d_model=32",
        "data.toy_size=1500",
        *tiny("model.d_model", "data.toy_size", "trainer.max_epochs"),
        "trainer.limit_train_batches=null",
        "trainer.limit_val_batches=null",
        "trainer.max_epochs=2",
        f"paths.log_dir={tmp_path}",
    )
    folder = tmp_path / "train" / "optuna" / "train"
    trials = load_study(tmp_path).trials
    assert [t.params["model.optimizer.lr"] for t in trials] == lrs
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.PRUNED] * 2
    for t in trials:
        job = job_dir(folder, t.number)
        assert (job / ".hydra" / "config.yaml").is_file() and list(job.glob("events.*")), job
        pruned = t.state == TrialState.PRUNED
        assert sorted(t.intermediate_values) == ([0] if pruned else [0, 1])  # val/acc after each epoch it ran
    assert trials[1].intermediate_values[0] < trials[0].intermediate_values[0]
    results = yaml.safe_load((folder / "optimization_results.yaml").read_text())
    assert results["best_params"]["model.optimizer.lr"] == 0.01


def test_optuna_with_the_joblib_launcher_reports_from_the_worker_processes(tmp_path: Path):
    run_warm(
        "train.py",
        "hparams_search=optuna",
        "hydra/launcher=joblib",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.n_jobs=2",
        *tiny(),
        "trainer.max_epochs=2",
        f"paths.log_dir={tmp_path}",
    )
    folder = tmp_path / "train" / "optuna" / "train"
    trials = load_study(tmp_path).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    for t in trials:
        assert_complete_job(job_dir(folder, t.number))
        assert sorted(t.intermediate_values) == [0, 1]  # reported by the job's own process to its trial
    pids = [{p.name.split(".")[-2] for p in job_dir(folder, n).glob("events.*")} for n in (0, 1)]
    assert pids[0] != pids[1]  # each trial in its own worker process


def test_hydra_discovers_the_sweeper_plugin_and_its_typed_settings():
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError

    found = {f"{c.__module__}.{c.__name__}" for c in Plugins.instance().discover(Sweeper)}
    assert "hydra_plugins.transformer_attention_sweeper.OptunaSweeper" in found
    node = ConfigStore.instance().load("hydra/sweeper/transformer_attention_optuna.yaml").node
    assert node._target_ == "hydra_plugins.transformer_attention_sweeper.OptunaSweeper" and node.n_trials == 20
    with pytest.raises(ConfigKeyError):
        OmegaConf.merge(node, {"n_trial": 3})  # a misspelt setting fails when Hydra composes the config


def test_search_space_from_overrides():
    space, fixed = search_space(
        [
            "model.d_model=choice(32, 64)",
            "model.dropout=interval(0.0, 0.3)",
            "model.optimizer.lr=tag(log, interval(0.0001, 0.01))",
            "model.num_layers=range(1, 6, 2)",
            "+model.x=tag(int, interval(1, 9))",
            "data.batch_size=16",
            "model.dropout=0.1",  # later on the command line: fixed, no longer searched
            "model.activation=relu,gelu",
        ]
    )
    assert space == {
        "model.d_model": CategoricalDistribution([32, 64]),
        "model.optimizer.lr": FloatDistribution(0.0001, 0.01, log=True),
        "model.num_layers": IntDistribution(1, 5, step=2),  # 1, 3, 5 as Hydra's range(1, 6, 2)
        "+model.x": IntDistribution(1, 9),
        "model.activation": CategoricalDistribution(["relu", "gelu"]),
    }
    assert fixed == ["data.batch_size=16", "model.dropout=0.1"]
    assert trial_overrides(fixed, {"model.activation": "a b", "model.optimizer.lr": 1e-07}) == (
        "model.activation=a\\ b",
        "model.optimizer.lr=1e-07",
        "data.batch_size=16",
        "model.dropout=0.1",
    )


def test_a_second_launch_of_a_running_study_is_refused(tmp_path: Path):
    held = lock_study(tmp_path, "s")
    with pytest.raises(SweepError, match=rf"another launch \(process {os.getpid()}\)"):
        lock_study(tmp_path, "s")
    release_lock(held)
    release_lock(lock_study(tmp_path, "s"))


# ---- launchers ----------------------------------------------------------------------------------
def test_joblib_launcher_runs_two_jobs_in_parallel_processes(tmp_path: Path):
    run_warm(
        "train.py",
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "model.num_heads=1,2",
        *tiny("model.num_heads"),
        f"paths.log_dir={tmp_path}",
    )
    (sweep,) = sweep_dirs(tmp_path)
    jobs = [job_dir(sweep, 0), job_dir(sweep, 1)]
    for job in jobs:
        assert_complete_job(job)
    pids = [{p.name.split(".")[-2] for p in job.glob("events.out.tfevents.*")} for job in jobs]
    assert all(len(p) == 1 for p in pids) and pids[0] != pids[1]  # each job in its own worker process
    start = [(job / ".hydra" / "config.yaml").stat().st_mtime for job in jobs]
    end = [max(p.stat().st_mtime for p in (job / "checkpoints").iterdir()) for job in jobs]
    assert start[0] < end[1] and start[1] < end[0]  # they overlapped in time


def test_submitit_local_launcher_runs_a_job(tmp_path: Path):
    run_warm(
        "train.py",
        "-m",
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=10",
        "seed=7",
        *tiny(),
        f"paths.log_dir={tmp_path}",
    )
    (sweep,) = sweep_dirs(tmp_path)
    assert_complete_job(job_dir(sweep, 0))
    assert job_config(job_dir(sweep, 0))["seed"] == 7


# ---- DDP on CPU ---------------------------------------------------------------------------------
def test_ddp_cpu_trains_on_two_processes_like_one_process_on_the_global_batch(tmp_path: Path):
    """Consistent, defined: with dropout 0 and SGD, 2 processes x batch 16 take the same optimizer steps
    and reach the same weights and validation metrics (to float precision) as 1 process x batch 32
    over the same sample order (DDPStrategy with 1 process uses the same DistributedSampler order; a plain
    trainer=cpu run takes the same steps but shuffles differently). Rank 1 must also use rank 0's
    tokenizer (trained once, by rank 0): a different vocabulary would break this equality."""
    same = [
        *tiny(),
        "model.dropout=0",
        "model.optimizer._target_=torch.optim.SGD",
        "model.optimizer.lr=0.5",
        "trainer.limit_train_batches=null",
        "trainer.limit_val_batches=null",
        "trainer=ddp_cpu",
    ]
    two = run_warm("train.py", *same, "data.batch_size=16", f"paths.log_dir={tmp_path / 'two'}")
    assert "MEMBER: 2/2" in two.stdout + two.stderr
    (run_two,) = (tmp_path / "two" / "train" / "runs").iterdir()
    one = run_warm(
        "train.py",
        *same,
        "trainer.devices=1",
        "data.batch_size=32",
        f"paths.log_dir={tmp_path / 'one'}",
        f"+data.tokenizer={run_two / 'tokenizer.json'}",
    )
    (run_one,) = (tmp_path / "one" / "train" / "runs").iterdir()

    ckpt_two = torch.load(run_two / "checkpoints" / "last.ckpt", weights_only=False)
    ckpt_one = torch.load(run_one / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt_two["global_step"] == ckpt_one["global_step"] == 11  # ceil(326 / 32) steps in one epoch
    for name, weight in ckpt_one["state_dict"].items():
        torch.testing.assert_close(ckpt_two["state_dict"][name], weight, atol=1e-5, rtol=1e-4, msg=name)
    m_two, m_one = final_metrics(two.stdout), final_metrics(one.stdout)
    for key in ("val/loss", "val/acc", "test/loss", "test/acc"):
        assert m_two[key] == pytest.approx(m_one[key], abs=2e-4), key


def test_ddp_cpu_in_a_multirun_spawns_its_ranks(tmp_path: Path):
    """Lightning's default DDP launch re-runs the command line, which in a multirun would start the sweep
    again in rank 1 and hang: a sweep's DDP jobs spawn their ranks instead."""
    args = ["-m", "trainer=ddp_cpu", "seed=3", *tiny(), f"paths.log_dir={tmp_path}"]
    proc = run_warm("train.py", *args, timeout=300)
    assert "MEMBER: 2/2" in proc.stdout + proc.stderr
    (sweep,) = sweep_dirs(tmp_path)
    assert_complete_job(job_dir(sweep, 0))
    assert "start_method: spawn" in (job_dir(sweep, 0) / "config_tree.log").read_text()
    logged = metrics_file.final_metrics(job_dir(sweep, 0))  # fit and test, each spawned, in one metrics.csv
    assert {"val/acc", "train/loss_epoch", "test/acc"} <= set(logged)
