"""Issue 14: every check that can be made before training is made before it, a full disk never leaves a
truncated checkpoint, and each error is one line that says the real cause. One test (or a few) per
problem of the issue, each on small files it writes: the exit code, the one line, no training step taken
(no checkpoint, no training event) and nothing already on disk changed."""

from __future__ import annotations

import csv
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import TINY, entry_env, run_entry, run_warm
from omegaconf import OmegaConf
from test_checkpoint import save_like_lightning, tiny_module
from test_config import conf, error_of  # noqa: F401 - conf: the fixture
from test_data import hf_cache, module, reviews, write  # noqa: F401 - hf_cache: the fixture

from transformer_attention.cli.rundir import CLAIMS, LOCK_NAME, RunDirBusy, claim_run_dir, give_up
from transformer_attention.errors import CheckpointError, DataError, DiskError, InputError, printable
from transformer_attention.files import release_lock
from transformer_attention.inference import predict
from transformer_attention.tasks.predict import main as predict_main
from transformer_attention.tasks.predict import read_texts
from transformer_attention.training.builders import build_loggers
from transformer_attention.training.checkpoint import AtomicCheckpointIO, load_checkpoint
from transformer_attention.training.metrics import format_metrics


# ---- helpers -----------------------------------------------------------------------------------
def snapshot(*folders: Path) -> dict[str, tuple[int, str]]:
    """Every file under `folders`: its modification time and content hash."""
    out = {}
    for folder in folders:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                out[str(p)] = (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def work_done(folder: Path) -> list[Path]:
    """What a training step leaves: checkpoints and TensorBoard events."""
    return [*folder.rglob("*.ckpt"), *folder.rglob("events.out.tfevents.*")]


def one_line(proc: subprocess.CompletedProcess, kind: str) -> str:
    """The entry point's single error line of `kind`, after checking the exit code and that no traceback printed."""
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith(f"{kind}: ")]
    assert len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


LOCAL_TINY = [o for o in TINY if not o.startswith("data.toy_size")]  # for data=local


def csv_reviews(folder: Path, splits=("train",), n: int = 60) -> Path:
    frames = reviews(n_train=n, n_test=20)
    return write(folder, {k: frames[k] for k in splits}, "csv")


# ---- 1. required splits, before training ---------------------------------------------------------
def test_no_test_split_fails_before_training_and_leaves_no_run_folder(tmp_path: Path):
    """With the carving of a test split switched off (data.test_fraction=null), data without one fails at once."""
    data = csv_reviews(tmp_path / "data")  # train.csv only
    before = snapshot(data)
    log_dir = tmp_path / "outputs"
    args = [*LOCAL_TINY, "data=local", f"data.path={data}", "data.test_fraction=null", f"paths.log_dir={log_dir}"]
    proc = run_entry("train.py", *args, check=False)
    line = one_line(proc, "data error")
    assert "has no test split (splits: ['train', 'validation'])" in line and "run with test=false" in line
    assert "data.test_fraction=0.1" in line
    assert not work_done(log_dir) and not list(log_dir.rglob("tokenizer.json"))
    assert not list((log_dir / "train" / "runs").glob("*"))  # 9: no run folder left behind
    assert snapshot(data) == before


@pytest.mark.slow
def test_every_job_of_a_sweep_fails_before_it_trains(tmp_path: Path):
    """Each job checks its data before training (an Optuna trial is such a job: hparams_search runs the same
    train() per trial), so a sweep on data that cannot succeed trains nothing."""
    data = csv_reviews(tmp_path / "data")
    log_dir = tmp_path / "outputs"
    args = ["-m", "model.num_heads=1,2", "data=local", f"data.path={data}", "data.test_fraction=null"]
    proc = run_warm("train.py", *args, *LOCAL_TINY, f"paths.log_dir={log_dir}", check=False, timeout=300)
    assert proc.returncode != 0 and "has no test split" in proc.stderr, proc.stderr[-3000:]
    logs = sorted(log_dir.rglob("train.log"))
    assert logs and all("has no test split" in p.read_text() for p in logs)  # a failed job keeps its log
    assert not work_done(log_dir)


# ---- 2. labels: one type per column, two classes or more -----------------------------------------
def test_a_csv_column_mixing_integers_and_words_is_an_error(tmp_path: Path):
    frames = reviews()
    frames["train"]["label"] = frames["train"]["label"].astype(object)
    frames["train"].loc[5, "label"] = "positive"
    write(tmp_path, frames, "csv")
    with pytest.raises(DataError, match=r"labels in .*train.csv mix integers and words: '[01]', '[01]' and 'positive'"):
        module(tmp_path).setup("fit")
    frames = reviews()
    frames["test"]["label"] = ["positive" if y else "negative" for y in frames["test"]["label"]]
    write(tmp_path, frames, "csv")  # each file of one kind, the files not
    with pytest.raises(DataError, match=r"labels mix integers and words: '[01]', '[01]' and '(posi|nega)tive'"):
        module(tmp_path).setup("fit")


@pytest.mark.parametrize("label", ["positive", 1])
def test_one_class_is_an_error_naming_it(tmp_path: Path, label):
    frames = reviews()
    for df in frames.values():
        df["label"] = label
    write(tmp_path, frames, "csv")
    with pytest.raises(DataError, match=rf"the train split holds one class, {label!r}, in all 60 rows"):
        module(tmp_path).setup("fit")


# ---- 3. predict: one text per line, a warning for all-[UNK] texts --------------------------------
def test_text_file_gives_one_text_per_newline_terminated_line(tmp_path: Path):
    lines = ["a review with\u0085a next-line", "one with\u2028a line separator", "a form\ffeed", "windows\r", "last"]
    f = tmp_path / "reviews.txt"
    f.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    assert read_texts(text_file=str(f)) == [line.strip() for line in lines]
    (tmp_path / "latin1.txt").write_bytes("ok\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1.txt is not UTF-8 text \(byte e9 at line 2\)"):
        read_texts(text_file=str(tmp_path / "latin1.txt"))


def test_a_text_of_unknown_words_only_is_warned_about(caplog):
    with caplog.at_level(logging.WARNING, logger="transformer_attention.inference"):
        preds = predict(tiny_module(), ["a good film", "zzqx wvvy"])
    assert len(preds) == 2
    assert "text 1 is all [UNK] tokens" in caplog.text and "text 0" not in caplog.text


# ---- 4. atomic checkpoints, a full disk ----------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path):
    """A 400 KiB tmpfs (root and `mount` needed; skipped otherwise), unmounted afterwards."""
    mnt = tmp_path / "small_disk"
    mnt.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a size-limited tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_keeps_the_old_checkpoint_and_says_how_much_is_free(small_disk: Path):
    io = AtomicCheckpointIO()
    target = small_disk / "checkpoints" / "last.ckpt"
    io.save_checkpoint({"w": torch.zeros(40_000)}, target)  # 160 KB
    before = target.read_bytes()
    with pytest.raises(
        DiskError, match=r"no space left to write last.ckpt \(0.\d\d MiB\) in .*checkpoints: 0.\d\d MiB free"
    ):
        io.save_checkpoint({"w": torch.ones(70_000)}, target)  # 280 KB: does not fit beside the old one
    assert target.read_bytes() == before  # the old checkpoint, whole
    assert sorted(p.name for p in target.parent.iterdir()) == ["last.ckpt"]  # no temporary file left
    assert torch.equal(torch.load(target, weights_only=True)["w"], torch.zeros(40_000))
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~current_umask())  # as a plain open() makes it


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.slow
def test_a_run_on_a_full_disk_ends_in_one_line_and_every_checkpoint_loads(small_disk: Path, tmp_path: Path):
    run = small_disk / "run"
    proc = run_warm(
        "train.py",
        *[o for o in TINY if not o.startswith("trainer.max_epochs")],
        "trainer.max_epochs=4",
        "trainer.limit_train_batches=2",
        "trainer.limit_val_batches=1",
        "callbacks.attention_maps=null",
        f"paths.log_dir={tmp_path / 'outputs'}",
        f"hydra.run.dir={run}",
        check=False,
    )
    line = one_line(proc, "disk error")
    assert f"in {run / 'checkpoints'}:" in line and "MiB free of 0.4 MiB" in line
    ckpts = sorted((run / "checkpoints").iterdir())
    assert ckpts and all(p.suffix == ".ckpt" for p in ckpts)  # no temporary file left
    for p in ckpts:
        assert load_checkpoint(p)["global_step"] > 0


# ---- 5. file errors with their cause --------------------------------------------------------------
def test_file_errors_say_their_cause(tmp_path: Path):
    cases = {
        "latin1": ("train.csv", "text,label\ngood,1\ncaf\xe9 bad,0\n".encode("latin-1")),
        "jsonl": (
            "train.jsonl",
            b'{"text": "good", "label": 1}\n{"text": "bad", "label": 0\n{"text": "x", "label": 1}\n',
        ),
        "empty": ("train.csv", b""),
        "header": ("train.csv", b"text,label\n"),
        "random": ("train.csv", bytes(range(256)) * 4),
    }
    expected = {
        "latin1": r"train.csv is not utf-8 text: byte e9 at line 3 .*data.encoding=latin-1",
        "jsonl": r"train.jsonl: line 2 is not valid JSON \(Expecting ',' delimiter",
        "empty": r"train.csv is empty \(0 bytes\)",
        "header": r"train.csv has no rows after the header \('text,label'\)",
        "random": r"train.csv is binary, not utf-8 text \(a NUL byte at offset 0\)",
    }
    for case, (name, content) in cases.items():
        (tmp_path / case).mkdir()
        (tmp_path / case / name).write_bytes(content)
        with pytest.raises(DataError, match=expected[case]):
            module(tmp_path / case).setup("fit")
    frames = reviews()
    for split, df in frames.items():
        df.to_csv(tmp_path / "latin1" / f"{split}.csv", index=False, encoding="latin-1")
    (tmp_path / "latin1" / "train.csv").write_bytes(
        (tmp_path / "latin1" / "train.csv").read_bytes() + "caf\xe9 bien,1\n".encode("latin-1")
    )
    dm = module(tmp_path / "latin1", encoding="latin-1")  # the setting the hint names
    dm.setup("fit")
    assert "café bien" in dm.raw["train"]["text"] + dm.raw["validation"]["text"]


def test_a_review_of_any_length_loads_from_csv_as_from_parquet(tmp_path: Path):
    frames = reviews()
    long = "a long review " * 80_000 + "end"  # 1.1 MB: beyond the csv module's default 131,072-character field
    frames["train"].loc[0, "text"] = long
    limit = csv.field_size_limit()
    texts = {}
    for fmt in ("csv", "parquet"):
        dm = module(write(tmp_path / fmt, frames, fmt), max_length=32)
        dm.setup("fit")
        texts[fmt] = sorted(dm.raw["train"]["text"] + dm.raw["validation"]["text"])
        assert max(batch["input_ids"].shape[1] for batch in dm.train_dataloader()) <= 32  # tokenized, then cut
    assert long in texts["csv"] and texts["csv"] == texts["parquet"]
    assert csv.field_size_limit() == limit  # the process's limit as it was


def test_a_file_in_another_format_than_its_extension_is_one_line_naming_the_rename(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    reviews()["train"].to_csv(data / "train.csv", sep="\t", index=False)
    args = [*LOCAL_TINY, "data=local", f"data.path={data / 'train.csv'}", f"paths.log_dir={tmp_path / 'out'}"]
    proc = run_entry("train.py", *args, check=False)
    line = one_line(proc, "data error")
    assert f"file {data / 'train.csv'} is named .csv but looks tab-separated (TSV)" in line
    assert "rename it to train.tsv" in line
    assert [text for text in proc.stderr.splitlines() if text.strip()] == [line]  # no datasets message, no bar
    (data / "train.csv").rename(data / "train.json")
    with pytest.raises(DataError, match=r"train.json is named .json but looks tab-separated .*rename it to train.tsv"):
        module(data).setup("fit")


# ---- 6. a run folder is locked while a run writes to it ------------------------------------------
HOLD = (
    "import sys, time; from transformer_attention.cli.rundir import claim_run_dir\n"
    "claim_run_dir(sys.argv[1]); print('held', flush=True); time.sleep(120)"
)


def hold_lock(folder: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True, env=entry_env()
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_run_in_a_locked_folder_is_refused_and_a_stale_lock_is_taken(tmp_path: Path, caplog):
    holder = hold_lock(tmp_path)
    try:
        with pytest.raises(RunDirBusy, match=rf"run folder {tmp_path} is in use by process {holder.pid}"):
            claim_run_dir(tmp_path)
    finally:
        holder.kill()
        holder.wait()
    owner = tmp_path / f"{LOCK_NAME}.pid"  # the holder's process id, for the message
    assert owner.read_text().strip() == str(holder.pid)  # left by a killed run: stale
    with caplog.at_level(logging.INFO, logger="transformer_attention.files"):
        lock = claim_run_dir(tmp_path).lock
    assert f"took over the stale lock of process {holder.pid}" in caplog.text
    assert owner.read_text().strip() == str(os.getpid())
    release_lock(lock)
    assert not owner.exists()


def test_resuming_into_a_folder_in_use_is_refused_in_one_line(tmp_path: Path):
    run = tmp_path / "outputs" / "train" / "runs" / "first"
    (run / ".hydra").mkdir(parents=True)
    (run / "checkpoints").mkdir()
    save_like_lightning(tiny_module(), run / "checkpoints" / "last.ckpt")
    (run / "train.log").write_text("the first run's log\n")
    before = snapshot(run)
    holder = hold_lock(run)
    try:
        ckpt = run / "checkpoints" / "last.ckpt"
        proc = run_entry("train.py", f"ckpt_path={ckpt}", *TINY, f"paths.log_dir={tmp_path}", check=False, timeout=120)
    finally:
        holder.kill()
        holder.wait()
    line = one_line(proc, "checkpoint error")
    assert f"run folder {run} is in use by process {holder.pid}" in line
    after = snapshot(run)
    del after[str(run / LOCK_NAME)], after[str(run / f"{LOCK_NAME}.pid")]  # the holder's lock files
    assert after == before  # its own config (.hydra/resume_<time>/) removed, nothing else touched


# ---- 7. one line instead of a traceback ----------------------------------------------------------
def test_evaluate_on_labels_the_checkpoint_does_not_know_is_one_line(tmp_path: Path):
    ckpt = save_like_lightning(tiny_module(), tmp_path / "model.ckpt")  # classes negative, positive
    frames = reviews()
    frames["test"]["label"] = [i % 5 for i in range(len(frames["test"]))]
    data = write(tmp_path / "data", frames, "csv")
    before = snapshot(tmp_path)
    log_dir = tmp_path / "outputs"
    proc = run_entry(
        "evaluate.py", f"ckpt_path={ckpt}", "data=local", f"data.path={data}", f"paths.log_dir={log_dir}", check=False
    )
    line = one_line(proc, "data error")
    assert f"label 2 in split 'test', row 2 is not a class of the checkpoint {ckpt}, which has 2 classes" in line
    assert not work_done(log_dir) and not list((log_dir / "evaluate" / "runs").glob("*"))
    assert snapshot(data) == {k: v for k, v in before.items() if k.startswith(str(data))}


def test_predict_max_length_beyond_the_model_names_predicts_own_key():
    module = tiny_module()
    with pytest.raises(InputError, match=r"^max_length=100000 must be a whole number from 2 to 512.*max_length="):
        predict(module, ["a good film"], max_length=100000)


def test_more_cpu_processes_than_cores_is_refused(conf):  # noqa: F811
    cores = len(os.sched_getaffinity(0))
    message = error_of(conf(f"trainer.devices={cores + 1}"))
    assert f"trainer.devices={cores + 1} CPU processes but this machine gives this run {cores} core(s)" in message
    assert f"use trainer.devices={cores}" in message


# ---- 8. misleading or silent ----------------------------------------------------------------------
def test_an_unknown_top_level_key_is_refused_with_the_key_meant(conf):  # noqa: F811
    assert "did you mean trainer.max_epochs=1?" in error_of(conf("+max_epochs=1"))
    assert "did you mean seed=3?" in error_of(conf("+sed=3"))
    from transformer_attention.cli.config import check_config

    check_config(conf("+trainer.benchmark=true"))  # under a group: what it builds checks it


def test_max_epochs_zero_is_refused(conf):  # noqa: F811
    assert "trainer.max_epochs=0 trains nothing" in error_of(conf("trainer.max_epochs=0"))


def test_random_bytes_are_not_a_checkpoint(tmp_path: Path):
    bad = tmp_path / "random.ckpt"
    bad.write_bytes(bytes(range(7, 256)) * 8)
    with pytest.raises(
        CheckpointError, match=r"random.ckpt \(1992 bytes\) is not a checkpoint: .* starts with bytes 07 08"
    ):
        load_checkpoint(bad)


def test_label_names_from_a_checkpoint_print_escaped(tmp_path: Path, capsys):
    module = tiny_module()
    module.hparams.label_names = ["neg\x1b[31m", "pos\nitive"]
    ckpt = save_like_lightning(module, tmp_path / "model.ckpt")
    cfg = OmegaConf.create(
        {"ckpt_path": str(ckpt), "text": "a good film", "save_attention": False, "batch_size": 4, "max_length": None}
    )
    cfg.paths = {"output_dir": str(tmp_path / "run")}
    predict_main(cfg)
    out = capsys.readouterr().out
    assert "\x1b" not in out and "neg\\x1b[31m=" in out and "pos\\nitive=" in out
    assert printable("test/f1/pos\nitive") in format_metrics({"test/f1/pos\nitive": 1.0})


# ---- 9. smaller ------------------------------------------------------------------------------------
def test_a_config_error_leaves_no_run_folder_but_a_folder_with_work_stays(tmp_path: Path):
    log_dir = tmp_path / "outputs"
    proc = run_entry("train.py", "model.dropout=1.5", f"paths.log_dir={log_dir}", check=False, timeout=120)
    one_line(proc, "config error")
    assert not log_dir.exists()  # the run folder and the folders made for it
    worked = tmp_path / "worked"
    claim_run_dir(worked)
    (worked / ".hydra").mkdir()
    (worked / "last.ckpt").write_bytes(b"x")
    assert not give_up(worked) and (worked / ".hydra").is_dir()
    release_lock(CLAIMS[worked].lock)
    old = tmp_path / "old"
    old.mkdir()
    (old / "notes.txt").write_text("the user's")
    claim_run_dir(old)
    (old / ".hydra").mkdir()
    (old / ".hydra" / "config.yaml").write_text("this run's")
    os.utime(old / "notes.txt", (time.time() + 60, time.time() + 60))  # newer than the run: its time says nothing
    assert give_up(old) and (old / "notes.txt").read_text() == "the user's"
    assert [p.name for p in old.iterdir()] == ["notes.txt"]  # the lock file too: this run made it


def test_a_resumed_tensorboard_run_hides_the_steps_logged_after_its_checkpoint(tmp_path: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    group = OmegaConf.create(
        {
            "tensorboard": {
                "_target_": "lightning.pytorch.loggers.TensorBoardLogger",
                "save_dir": str(tmp_path),
                "name": None,
                "version": "",
            }
        }
    )
    (first,) = build_loggers(group)
    for step in range(10):  # killed at step 9, its checkpoint at step 6
        first.log_metrics({"train/loss": 1.0}, step=step)
    first.finalize("failed")
    (resumed,) = build_loggers(group, purge_step=6)
    for step in range(6, 12):
        resumed.log_metrics({"train/loss": 2.0}, step=step)
    resumed.finalize("success")
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    acc.Reload()
    events = acc.Scalars("train/loss")
    assert [e.step for e in events] == list(range(12))  # each step once
    assert [e.value for e in events] == [1.0] * 6 + [2.0] * 6


def test_validation_and_test_batches_are_one_fixed_shuffle_with_every_class(tmp_path: Path):
    frames = reviews(120, 40)
    frames = {k: df.sort_values("label", kind="stable").reset_index(drop=True) for k, df in frames.items()}
    frames["validation"] = frames.pop("test").copy()
    frames["test"] = frames["validation"].copy()
    write(tmp_path, frames, "parquet")

    def orders(dm):
        return [[int(x) for b in loader for x in b["labels"]] for loader in (dm.val_dataloader(), dm.test_dataloader())]

    dm = module(tmp_path, batch_size=8)
    dm.setup("fit")
    first = orders(dm)
    assert orders(dm) == first == orders(module(tmp_path, batch_size=8, seed=7))  # every epoch, run and seed
    for labels in first:
        assert len(set(labels[:8])) == 2  # the first batch (limit_val_batches=1) sees both classes
        assert sorted(labels) == sorted(frames["test"]["label"])


def test_the_final_table_is_aligned_to_four_digits_without_learning_rates_or_repeats():
    table = format_metrics(
        {
            "train/loss": 0.15552,
            "train/loss_epoch": 0.15552,  # Lightning's copy of train/loss
            "train/loss_step": 0.0082,  # the last step's value
            "lr-AdamW/pg1": 1e-4,
            "train/lr": 1e-4,
            "test/precision/negative": 0.93782,
            "val/loss": 0.012345,
        }
    )
    assert table.splitlines() == [
        "  test/precision/negative  0.9378",
        "  train/loss               0.1555",
        "  val/loss                 0.01235",
    ]
