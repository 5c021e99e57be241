"""Stopping and resuming: SIGTERM mid-training keeps a usable last.ckpt, `ckpt_path=` continues in the
same run folder and TensorBoard run with a continuous global step; the same seed gives the same run."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from conftest import ROOT, TINY, popen_warm, run_dirs, run_warm
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_checkpoint import TEXTS
from test_pasted_commands import paste, printed_command
from test_train import final_metrics

from transformer_attention.data import train_tokenizer

EPOCHS, BATCHES = 5, 3
RESUMABLE = [
    *[o for o in TINY if not o.startswith("trainer.max_epochs")],
    f"trainer.max_epochs={EPOCHS}",
    f"trainer.limit_train_batches={BATCHES}",
    "trainer.limit_val_batches=1",
    "trainer.log_every_n_steps=1",
]

# train.py with every training step slowed down, so a signal surely lands mid-training
SLOW_TRAIN = """
import runpy, sys, time
from transformer_attention.module import ClassifierModule
step = ClassifierModule.training_step
def slow_step(self, batch, batch_idx):
    time.sleep({delay})
    return step(self, batch, batch_idx)
ClassifierModule.training_step = slow_step
sys.argv = [{train!r}, *sys.argv[1:]]
runpy.run_path({train!r}, run_name="__main__")
"""


def logged_steps(run: Path, tag: str = "~train/loss_step") -> list[int]:
    """The steps of `tag` across every event file of the run's TensorBoard folder, in file order."""
    steps = []
    for events in sorted(run.glob("events.out.tfevents.*"), key=lambda p: p.stat().st_mtime):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        if tag in acc.Tags()["scalars"]:
            steps += [e.step for e in acc.Scalars(tag)]
    return steps


def interrupt_mid_training(
    overrides: list[str], tmp_path: Path, signum: int, script: Path | None = None, task: str = "train"
) -> subprocess.CompletedProcess:
    """Start a slowed-down training (`script`: train.py slowed down, unless given), wait for its first
    last.ckpt (`task`: the folder under the log folder that holds its runs, e.g. `train/multiruns/*`), send
    `signum`, wait for the exit."""
    if script is None:
        script = tmp_path / "slow_train.py"
        script.write_text(SLOW_TRAIN.format(delay=0.3, train=str(ROOT / "train.py")))
    log_dir = Path(next(o for o in overrides if o.startswith("paths.log_dir=")).split("=", 1)[1])
    proc = popen_warm(script, *overrides, cwd=tmp_path)  # a forked process: signalled as one a shell started
    try:
        deadline = time.monotonic() + 240
        runs = task if "/" in task else f"{task}/runs"
        while not list(log_dir.glob(f"{runs}/*/checkpoints/last.ckpt")):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "no last.ckpt after 240 s"
            time.sleep(0.05)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_interrupt_keeps_last_ckpt_and_resume_continues_the_same_run(signum: int, tmp_path: Path):
    """After SIGTERM the resume line the run printed, pasted into bash in the folder it ran in; after Ctrl-C
    `ckpt_path=<last.ckpt>` typed."""
    log_dir = tmp_path / "outputs"
    overrides = [*RESUMABLE, f"paths.log_dir={log_dir}"]
    stopped = interrupt_mid_training(overrides, tmp_path, signum)
    assert stopped.returncode == 128 + signum, stopped.stderr[-3000:]
    (run,) = run_dirs(log_dir)
    last = run / "checkpoints" / "last.ckpt"
    assert f"ckpt_path={last}" in stopped.stdout + stopped.stderr  # says how to resume
    ckpt = torch.load(last, weights_only=True)  # usable, and plain data
    assert 0 < ckpt["global_step"] < EPOCHS * BATCHES
    # all the first run wrote, but the checkpoints (they go on) and its log (appended to)
    written = {f: f.read_bytes() for f in run.rglob("*") if f.is_file() and f.parent.name != "checkpoints"}
    log_before = written.pop(run / "train.log")
    steps_before = logged_steps(run)
    assert steps_before == list(range(ckpt["global_step"]))

    if signum == signal.SIGTERM:
        resumed = paste(printed_command(stopped.stdout + stopped.stderr, "resume with:"), tmp_path)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    else:
        resumed = run_warm("train.py", *overrides, f"ckpt_path={last}", cwd=tmp_path)
    assert f"Restored all states from the checkpoint at {last}" in resumed.stdout + resumed.stderr
    assert "exists and is not empty" not in resumed.stdout + resumed.stderr  # its own folder: no warning about it
    assert "final metrics" in resumed.stdout
    assert run_dirs(log_dir) == [run]  # the same folder, nothing new beside it
    end = torch.load(last, weights_only=True)
    assert end["epoch"] == EPOCHS - 1 and end["global_step"] == EPOCHS * BATCHES
    assert logged_steps(run) == list(range(EPOCHS * BATCHES))  # one TensorBoard run: no gap, no repeat
    assert {f: f.read_bytes() for f in written} == written  # nothing lost or overwritten
    assert (run / "train.log").read_bytes().startswith(log_before)
    (resume_config,) = (run / ".hydra").glob("resume_*/config.yaml")  # the resumed run's config: beside
    assert "ckpt_path" in resume_config.read_text()


@pytest.mark.slow
def test_same_seed_same_run(tmp_path: Path):
    """Two runs, the second in deterministic mode: the same metrics and bit-identical weights on CPU. Then
    `ckpt_path=<the first run's best checkpoint> train=false` tests that checkpoint's weights (the run's own
    test metrics, not a fresh model's), in its folder, and keeps the metrics the run wrote there."""
    log_dir = tmp_path / "outputs"
    first = run_warm("train.py", *TINY, f"paths.log_dir={log_dir}")
    second = run_warm("train.py", *TINY, f"paths.log_dir={log_dir}", "trainer.deterministic=true")
    assert final_metrics(first.stdout) == final_metrics(second.stdout)
    runs = run_dirs(log_dir)
    a, b = (torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"] for run in runs)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    before = json.loads((runs[0] / "metrics.json").read_text())
    (best,) = (runs[0] / "checkpoints").glob("epoch_*.ckpt")  # the one the run tested
    tested = run_warm("train.py", *TINY, f"paths.log_dir={log_dir}", f"ckpt_path={best}", "train=false",
                      "callbacks.attention_maps=null")  # fmt: skip
    for key in ("test/acc", "test/loss"):  # a fresh model's loss would differ
        assert final_metrics(tested.stdout)[key] == final_metrics(first.stdout)[key], key
    assert "testing the weights as they are" not in tested.stdout + tested.stderr
    assert json.loads((runs[0] / "metrics.json").read_text()) == before  # the validation metrics kept
    assert run_dirs(log_dir) == runs


def test_tokenizer_training_is_deterministic():
    """The `tokenizers` trainer numbers its "##" pieces in hash order (huggingface/tokenizers#1794)."""
    texts = TEXTS * 3 + ["unbelievably underwhelming", "overacted and overlong", "wonderfully understated"]
    assert len({train_tokenizer(texts, vocab_size=120, min_frequency=1).to_str() for _ in range(8)}) == 1


def test_a_stop_as_the_last_epoch_ends_gives_the_test_command_not_a_resume(tmp_path: Path, caplog):
    """Stopped after every epoch has trained (the last epoch's end, before its on_train_end), a resume would be
    refused ("nothing is left to train"): SaveOnInterrupt says how to test the checkpoint instead."""
    import logging

    import lightning as L
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    from transformer_attention.callbacks.interrupt import SaveOnInterrupt
    from transformer_attention.training.builders import TrainerBuilder, build_data, build_model, instantiate_group

    overrides = [
        *TINY,
        f"paths.output_dir={tmp_path}",
        "callbacks.attention_maps=null",
        "callbacks.model_analysis=null",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    L.seed_everything(0)
    callbacks = instantiate_group(cfg.callbacks)
    (stop,) = [c for c in callbacks if isinstance(c, SaveOnInterrupt)]
    dm = build_data(cfg.data, output_dir=str(tmp_path))
    dm.setup("fit")
    module = build_model(instantiate(cfg.model, _partial_=True), dm)
    trainer = TrainerBuilder(cfg.trainer, callbacks, []).for_model(module, dm)
    trainer.fit(module, datamodule=dm)
    stop._trained = False  # as where the fit loop raises after its last epoch, before on_train_end
    with caplog.at_level(logging.WARNING):
        stop.on_exception(trainer, module, SIGTERMException())
    (line,) = [r.getMessage() for r in caplog.records if "SIGTERM: stopped" in r.getMessage()]
    assert "every epoch trained" in line and "test it with:\n  python evaluate.py ckpt_path=" in line
    assert "resume with" not in line and (tmp_path / "checkpoints" / "last.ckpt").is_file()
