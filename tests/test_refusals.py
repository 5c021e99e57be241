"""Bad input refused in one line before any work, with the same rules for every entry point: a run folder has
one owner, pretraining stops and resumes like training, every value a user can fix is named with its fix, and a
sweep's failed jobs are named at its end. Each test checks the exit code, the single `<kind>: ...` line, that no
traceback printed, that no training step was taken, and that nothing already on disk changed."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from conftest import ROOT, TINY, TINY_PRETRAINING, run_dirs, run_entry, run_warm
from test_fail_early import one_line, snapshot, work_done
from test_resume import interrupt_mid_training

LOG = "paths.log_dir={}"


@pytest.fixture(scope="module")
def first_run(tiny_run) -> Path:
    """A finished tiny training run (conftest's, shared), for the tests that point other runs at it."""
    return tiny_run[0]


def refused(
    script: str,
    *overrides: str,
    kind: str = "config error",
    within: float = 60.0,
    warm: bool = False,
) -> str:
    """Run an entry point that must refuse its input: the one `kind` line it prints, after checking the exit code,
    that no traceback printed and that it took less than `within` seconds (no training). `warm`: started warm
    (conftest's run_warm), for a refusal that comes after the run's start."""
    start = time.monotonic()
    proc = (run_warm if warm else run_entry)(script, *overrides, check=False)
    line = one_line(proc, kind)
    assert time.monotonic() - start < within
    return line


# ---- 1. a run folder has one owner --------------------------------------------------------------------
@pytest.mark.slow
def test_a_new_run_into_another_runs_folder_is_refused_and_changes_nothing(first_run: Path):
    before = snapshot(first_run)
    line = refused("train.py", *TINY, f"hydra.run.dir={first_run}", "seed=7", warm=True)
    assert f"run folder {first_run} holds another run's files" in line
    assert f"ckpt_path={first_run}/checkpoints/last.ckpt" in line  # how to resume it instead
    ckpt = first_run / "checkpoints" / "last.ckpt"
    line = refused("predict.py", f"ckpt_path={ckpt}", "text=a good film", f"hydra.run.dir={first_run}", warm=True)
    assert "holds another run's files" in line and "ckpt_path=" not in line  # predict.py resumes nothing
    line = refused("evaluate.py", f"ckpt_path={ckpt}", f"hydra.run.dir={first_run}", warm=True)
    assert "holds another run's files" in line
    assert snapshot(first_run) == before  # every file, byte for byte and its time


def test_a_grid_sweep_into_another_sweeps_folder_is_refused(tmp_path: Path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    before = snapshot(sweep)
    line = refused("train.py", "-m", "seed=1,2", *TINY, f"hydra.sweep.dir={sweep}", LOG.format(tmp_path / "out"))
    assert f"hydra.sweep.dir={sweep} holds another sweep" in line
    assert snapshot(sweep) == before and not list(sweep.iterdir())[1:]


@pytest.mark.parametrize("key", ["hydra.run.dir", "paths.log_dir"])
def test_a_file_where_a_folder_belongs_is_named(tmp_path: Path, key: str):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine\n")
    log = [] if key == "paths.log_dir" else [LOG.format(tmp_path / "out")]
    line = refused("train.py", *TINY, *log, f"{key}={afile}")
    assert f"{key}={afile} is a file, not a folder" in line
    assert afile.read_text() == "mine\n" and not (tmp_path / "out").exists()


# ---- 2. looks like success when it was not -----------------------------------------------------------
PRETRAIN = [
    *[o for o in TINY if not o.startswith(("model.num_layers", "trainer."))],
    *[o for o in TINY_PRETRAINING if not o.startswith("pretrain.trainer.max_epochs")],
    "model.num_layers=2",
    "pretrain.batch_size=16",
    "pretrain.max_length=32",
    "pretrain.trainer.precision=32-true",
    "pretrain.trainer.val_check_interval=1.0",
    "pretrain.callbacks.attention_maps=null",
]

SLOW_PRETRAIN = """
import runpy, sys, time
from transformer_attention.pretraining import MaskedLMModule
step = MaskedLMModule.training_step
def slow_step(self, batch, batch_idx):
    time.sleep(0.3)
    return step(self, batch, batch_idx)
MaskedLMModule.training_step = slow_step
sys.argv = [{script!r}, *sys.argv[1:]]
runpy.run_path({script!r}, run_name="__main__")
"""


@pytest.mark.slow
def test_pretraining_stopped_by_sigterm_exits_143_keeps_its_checkpoint_and_resumes(tmp_path: Path):
    """pretrain.py as train.py: SIGTERM saves last.ckpt at the step, says how to resume, exits 128 + 15; the
    command it prints goes on in the same folder."""
    script = tmp_path / "slow_pretrain.py"
    script.write_text(SLOW_PRETRAIN.format(script=str(ROOT / "pretrain.py")))
    log_dir = tmp_path / "outputs"
    args = [*PRETRAIN, "pretrain.trainer.max_epochs=20", LOG.format(log_dir)]
    proc = interrupt_mid_training(args, tmp_path, signal.SIGTERM, script=script, task="pretrain")
    out, err = proc.stdout, proc.stderr
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    (run,) = run_dirs(log_dir, "pretrain")
    last = run / "checkpoints" / "last.ckpt"
    assert last.is_file() and "Traceback" not in err
    assert "SIGTERM: stopped at epoch" in out + err
    assert "python pretrain.py" in out + err and f"ckpt_path={last}" in out + err
    resumed = run_warm(
        "pretrain.py", *args[:-2], "pretrain.trainer.max_epochs=3", LOG.format(log_dir), f"ckpt_path={last}"
    )
    assert run_dirs(log_dir, "pretrain") == [run]  # it went on in its own folder
    assert "pretrained encoder: " in resumed.stdout


@pytest.mark.parametrize(
    ("script", "override", "message"),
    [
        ("pretrain.py", "pretrain.scheduler.warmup_fraction=2", "pretrain.scheduler.warmup_fraction=2 must be a"),
        ("pretrain.py", "pretrain.optimizer.lr=-1", "pretrain.optimizer.lr=-1 must be a positive number"),
        ("pretrain.py", "pretrain.trainer.val_check_interval=0", "pretrain.trainer.val_check_interval=0 must be a"),
        ("pretrain.py", "pretrain.trainer.val_check_interval=-1", "pretrain.trainer.val_check_interval=-1 must be"),
        ("train.py", "pretrain.trainer.val_check_interval=0", "pretrain.trainer.val_check_interval=0 must be"),
        ("train.py", "seed=abc", "seed='abc' must be a whole number >= 0"),
    ],
)
def test_every_entry_checks_its_settings_before_reading_data(tmp_path: Path, script: str, override: str, message):
    line = refused(script, *(PRETRAIN if script == "pretrain.py" else TINY), LOG.format(tmp_path / "out"), override)
    assert message in line
    assert not work_done(tmp_path) and not list(tmp_path.rglob("tokenizer.json"))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("texts=['','  ']", "texts[0] is empty: a text to classify needs at least one word"),
        ("text=' '", "text is empty"),
        ("batch_size=0", "batch_size=0 must be a whole number >= 1"),
        ("device=cuda", "device=cuda but this torch sees no CUDA GPU"),
        ("device=tpu", "device='tpu' is not a device"),
    ],
)
def test_predict_refuses_what_it_cannot_classify_or_run_on(first_run: Path, tmp_path: Path, override, message):
    if override.startswith("device=cuda"):
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            pytest.skip("a GPU is visible: device=cuda is valid here")
    ckpt = first_run / "checkpoints" / "last.ckpt"
    kind = "input error" if "text" in override else "config error"
    line = refused(
        "predict.py", f"ckpt_path={ckpt}", "text=a good film", override, LOG.format(tmp_path), kind=kind, warm=True
    )
    assert message in line
    assert not list((tmp_path / "predict" / "runs").glob("*"))  # no folder left behind


# ---- 4. a sweep: its failed jobs named at its end, its search checked before it starts -----------------
@pytest.mark.slow
def test_a_sweep_with_a_failed_job_names_it_and_exits_non_zero(tmp_path: Path):
    tiny = [o for o in TINY if not o.startswith("model.num_heads")]
    proc = run_warm("train.py", "-m", "model.num_heads=1,3,2", *tiny, LOG.format(tmp_path), check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    failed = [line for line in proc.stderr.splitlines() if line.startswith("job ")]
    assert len(failed) == 1 and failed[0].startswith("job 1 (model.num_heads=3")
    assert "failed: config error: model.d_model=16 is not divisible by model.num_heads=3" in failed[0]
    assert "1 of 3 jobs failed" in proc.stderr
    assert proc.stdout.count("final metrics") == 2  # the other jobs ran to their end
    summary = next(tmp_path.glob("train/multiruns/*/summary.csv")).read_text().splitlines()
    assert summary[-1].startswith("1,failed,3,")  # listed last, no metrics


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("hydra.sweeper.n_trials=0", "hydra.sweeper.n_trials=0 must be a whole number >= 1"),
        ("model.dropout=interval(0.5,0.1)", "model.dropout=interval(0.5, 0.1) is empty"),
    ],
)
def test_an_impossible_search_fails_before_its_study_exists(tmp_path: Path, override: str, message: str):
    line = refused("train.py", "hparams_search=optuna", *TINY, override, LOG.format(tmp_path), kind="sweep error")
    assert message in line
    assert not list(tmp_path.rglob("optuna.db")) and not list(tmp_path.rglob("multirun.yaml"))


# ---- 5. messages that point at the real cause ----------------------------------------------------------
@pytest.mark.slow
def test_resuming_with_no_epoch_left_says_so_before_testing(first_run: Path, tmp_path: Path):
    ckpt = first_run / "checkpoints" / "last.ckpt"
    before = snapshot(first_run)
    line = refused("train.py", *TINY, f"ckpt_path={ckpt}", kind="checkpoint error", warm=True)  # TINY: 1 epoch
    assert "trainer.max_epochs=1 but the checkpoint" in line and "has trained 1 epoch(s)" in line
    assert "raise trainer.max_epochs above 1" in line.lower()
    assert snapshot(first_run) == before  # refused before any work: not a line in its log, no config beside


@pytest.fixture(scope="module")
def mlm_run(tmp_path_factory) -> Path:
    """A finished tiny pretrain.py run."""
    log_dir = tmp_path_factory.mktemp("mlm") / "outputs"
    run_warm("pretrain.py", *PRETRAIN, "pretrain.trainer.max_epochs=1", LOG.format(log_dir))
    (run,) = run_dirs(log_dir, "pretrain")
    return run


@pytest.mark.slow
def test_a_resume_of_the_other_kinds_checkpoint_is_refused_and_adds_nothing(first_run: Path, mlm_run: Path, tmp_path):
    """train.py on a pretrain.py run's last.ckpt, pretrain.py on a train.py run's: each resumes in that run's folder,
    is refused by the checkpoint's kind, and leaves the folder as it was: no log line, no empty log, no config."""
    before = {run: (snapshot(run), sorted(run.rglob("*"))) for run in (first_run, mlm_run)}
    line = refused(
        "train.py", *TINY, f"ckpt_path={mlm_run / 'checkpoints' / 'last.ckpt'}", kind="checkpoint error", warm=True
    )
    assert "is a pretrained encoder (pretrain.py), not a classifier" in line
    classifier = first_run / "checkpoints" / "last.ckpt"
    args = [*PRETRAIN, LOG.format(tmp_path), f"ckpt_path={classifier}"]
    line = refused("pretrain.py", *args, kind="checkpoint error", warm=True)
    assert "is a classifier checkpoint (train.py)" in line
    assert {run: (snapshot(run), sorted(run.rglob("*"))) for run in (first_run, mlm_run)} == before


@pytest.mark.slow
def test_a_pretrained_encoder_given_as_a_classifier_points_at_init_from(mlm_run: Path, tmp_path: Path):
    (encoder,) = (mlm_run / "checkpoints").glob("mlm_*.ckpt")
    for script, given in (("predict.py", ["text=fine"]), ("evaluate.py", []), ("train.py", TINY)):
        args = [*given, f"ckpt_path={encoder}", LOG.format(tmp_path / script)]
        line = refused(script, *args, kind="checkpoint error", warm=True)
        assert "is a pretrained encoder (pretrain.py), not a classifier" in line
        assert f"python train.py model.init_from={encoder}" in line


def test_random_bytes_as_init_from_never_suggest_weights_only_false(tmp_path: Path):
    bad = tmp_path / "random.ckpt"
    bad.write_bytes(b"\x80\x04" + bytes(range(256)) * 4)  # a pickle's first bytes, then garbage
    proc = run_entry("train.py", *TINY, LOG.format(tmp_path / "out"), f"model.init_from={bad}", check=False)
    line = one_line(proc, "checkpoint error")
    assert f"model.init_from='{bad}'" in line and "weights_only=False" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_an_unknown_hub_name_among_the_extra_texts_names_that_setting(tmp_path: Path):
    line = refused("pretrain.py", *PRETRAIN, LOG.format(tmp_path), "pretrain.extra_texts=[nobody/no-such-set]",
                   kind="data error", warm=True)  # fmt: skip
    assert "pretrain.extra_texts: 'nobody/no-such-set' is not a local file or folder" in line
    assert "data.name" not in line


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_is_called_what_it_is(tmp_path: Path):
    fifo = tmp_path / "reviews.csv"
    os.mkfifo(fifo)
    tiny = [o for o in TINY if not o.startswith("data.toy_size")]
    line = refused(
        "train.py", *tiny, "data=local", f"data.path={fifo}", LOG.format(tmp_path / "out"), kind="data error"
    )
    assert "is not a regular file or a folder (a FIFO, socket or device)" in line
    line = refused("predict.py", f"ckpt_path={fifo}", "text=x", LOG.format(tmp_path / "out"), kind="checkpoint error")
    assert "is not a regular file (a FIFO, socket or device)" in line


def test_a_logger_without_its_extra_names_the_extra(tmp_path: Path):
    pytest.importorskip("torch")
    try:
        import mlflow  # noqa: F401

        pytest.skip("mlflow is installed here")
    except ImportError:
        pass
    line = refused("train.py", *TINY, "logger=mlflow", LOG.format(tmp_path))
    assert "logger=mlflow needs mlflow, which is not installed: pip install -e '.[mlflow]'" in line
