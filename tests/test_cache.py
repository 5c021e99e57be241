"""Caches that heal themselves: a damaged cache file (truncated, empty, garbage) is moved aside to
`<name>.corrupt-<time>` with one warning line naming it, and rebuilt to what a clean build gives; a full disk
is a DiskError naming the folder and its free space, with nothing half-written left; a run waiting on a lock
says whom it waits for."""

from __future__ import annotations

import io
import logging
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import entry_env, run_dirs, run_warm
from test_fail_early import small_disk  # noqa: F401 - the fixture: a 400 KiB tmpfs
from test_pretraining import TRAIN_PY

from transformer_attention.data import cache
from transformer_attention.data.datamodule import ReviewDataModule
from transformer_attention.data.tokenizer import train_tokenizer
from transformer_attention.errors import DiskError
from transformer_attention.files import hold_lock, release_lock
from transformer_attention.pretraining.store import keep
from transformer_attention.pretraining.weights import PretrainedEncoder


def truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def empty(path: Path) -> None:
    path.write_bytes(b"")


def garbage(path: Path) -> None:
    path.write_bytes(random.Random(0).randbytes(max(64, path.stat().st_size)))


DAMAGES: dict[str, Callable[[Path], None]] = {"truncated": truncated, "empty": empty, "garbage": garbage}
PATTERNS = {"ids": "ids-*.npz", "tokenizer": "tokenizer-*.json"}


def built(cache_dir: Path) -> ReviewDataModule:
    dm = ReviewDataModule(name="toy", toy_size=300, max_length=32, vocab_size=300, min_frequency=1, cache_dir=cache_dir)
    dm.setup("fit")
    return dm


def rows(dm: ReviewDataModule) -> dict[str, list[list[int]]]:
    return {split: [list(map(int, r)) for r in data.ids] for split, data in dm.splits.items()}


def set_aside_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "moved it aside" in r.getMessage()]


@pytest.mark.parametrize("damage", list(DAMAGES))
@pytest.mark.parametrize("kind", list(PATTERNS))
def test_a_damaged_cache_file_is_set_aside_and_rebuilt_as_a_clean_build_makes_it(tmp_path, caplog, kind, damage):
    cache_dir = tmp_path / "cache"
    clean = built(cache_dir)  # an empty cache: the clean build, which fills it
    targets = sorted(cache_dir.glob(PATTERNS[kind]))
    assert len(targets) == {"ids": 3, "tokenizer": 1}[kind]  # train, validation, test; one tokenizer
    good = {p: p.read_bytes() for p in targets}
    for p in targets:
        DAMAGES[damage](p)
    damaged = {p: p.read_bytes() for p in targets}
    with caplog.at_level(logging.INFO, logger="transformer_attention"):
        again = built(cache_dir)  # the run goes on
    records = set_aside_records(caplog)
    assert len(records) == len(targets)
    for p in targets:
        (aside,) = cache_dir.glob(f"{p.name}.corrupt-*")
        assert aside.read_bytes() == damaged[p]  # kept for a look, as it was
        (record,) = [r for r in records if str(p) in r.getMessage()]
        message = record.getMessage()
        assert record.levelno == logging.WARNING and "\n" not in message
        assert f"{p} cannot be read ({len(damaged[p])} bytes, " in message and aside.name in message
    assert again.tokenizer.to_str() == clean.tokenizer.to_str()
    assert rows(again) == rows(clean)
    for p in targets:  # the files rebuilt: the same tokenizer JSON; the same ids (npz bytes hold the write time)
        if kind == "tokenizer":
            assert p.read_text() == good[p].decode()
        else:
            with np.load(p) as z, np.load(io.BytesIO(good[p])) as g:
                assert np.array_equal(z["flat"], g["flat"]) and np.array_equal(z["offsets"], g["offsets"])
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="transformer_attention"):
        third = built(cache_dir)  # healed: read from the cache, nothing set aside
    assert not set_aside_records(caplog)
    assert caplog.text.count("read from the cache") == 3 and rows(third) == rows(clean)


def test_ids_that_do_not_match_their_texts_are_set_aside(tmp_path, caplog):
    cache_dir = tmp_path / "cache"
    clean = built(cache_dir)
    target = max(cache_dir.glob(PATTERNS["ids"]), key=lambda p: p.stat().st_size)
    flat, offsets = cache.pack([np.array([5, 6, 7])] * 4)  # a readable archive, the wrong number of rows
    np.savez(target, flat=flat, offsets=offsets)
    with caplog.at_level(logging.WARNING, logger="transformer_attention.data.cache"):
        again = built(cache_dir)
    assert f"{target} cannot be read" in caplog.text and "4 rows for" in caplog.text
    assert rows(again) == rows(clean)


@pytest.mark.slow
def test_a_damaged_cached_encoder_is_set_aside_and_pretrained_again(tmp_path: Path):
    """train.py model.init_from=pretrain after the cached encoder was truncated, emptied or overwritten: the run
    pretrains again (the same weights as the first time) and goes on."""
    log_dir = tmp_path / "outputs"
    args = [*TRAIN_PY, f"paths.log_dir={log_dir}", "model.init_from=pretrain", "trainer.limit_train_batches=2"]
    args += ["callbacks.attention_maps=null", "pretrain.callbacks.attention_maps=null"]
    args += ["pretrain.trainer.limit_train_batches=3", "pretrain.trainer.limit_val_batches=1"]  # a short pretraining
    run_warm("train.py", *args)
    (cached,) = (log_dir / ".cache" / "pretrained").glob("mlm-*.ckpt")
    clean = PretrainedEncoder.load(cached).weights
    for n, (name, damage) in enumerate(DAMAGES.items(), start=1):
        damage(cached)
        damaged = cached.read_bytes()
        proc = run_warm("train.py", *args, "train=false", "test=false")  # the start of the run: no fine-tuning
        out = proc.stdout + proc.stderr
        (line,) = [x for x in out.splitlines() if "moved it aside" in x]
        assert f"{cached} cannot be read ({len(damaged)} bytes, " in line, name
        asides = sorted(cached.parent.glob(f"{cached.name}.corrupt-*"))
        assert len(asides) == n and asides[-1].read_bytes() == damaged and asides[-1].name in line
        assert "no encoder cached for these texts and settings; pretraining" in out
        assert len(run_dirs(log_dir, "pretrain")) == n + 1
        assert "pretrained tensors copied" in out  # the fine-tuning started from it
        rebuilt = PretrainedEncoder.load(cached).weights
        assert rebuilt.keys() == clean.keys()
        assert all(torch.equal(rebuilt[k], clean[k]) for k in clean), name


# ---- a full disk ---------------------------------------------------------------------------------
def test_caching_the_encoder_on_a_full_disk_names_its_kept_checkpoint(small_disk: Path, tmp_path: Path):  # noqa: F811
    folder = small_disk / ".cache" / "pretrained"
    folder.mkdir(parents=True)
    (folder / "mlm-other.ckpt").write_bytes(b"x" * 250_000)  # a cached encoder already there: 250 of 400 KiB
    ckpt = tmp_path / "pretrain" / "runs" / "t" / "checkpoints" / "mlm_epoch=0.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"y" * 200_000)
    with pytest.raises(DiskError) as err:
        keep(ckpt, folder / "mlm-new.ckpt")
    message = str(err.value)
    assert f"no space left to write mlm-new.ckpt in {folder}: 0." in message and "MiB free of 0.4 MiB" in message
    assert f"the pretraining's own checkpoint is kept: {ckpt}" in message
    assert f"model.init_from={ckpt}" in message and "\n" not in message
    assert sorted(p.name for p in folder.iterdir()) == ["mlm-other.ckpt"]  # nothing half-written, no .tmp
    assert ckpt.read_bytes() == b"y" * 200_000


def test_tokenized_ids_on_a_full_disk_are_a_disk_error_leaving_no_temporary_file(small_disk: Path):  # noqa: F811
    folder = small_disk / "cache"
    folder.mkdir()
    texts = [" ".join(["good"] * 1000)] * 120  # 480 KB of int32 ids
    tok = train_tokenizer(texts[:1], vocab_size=50, min_frequency=1)
    with pytest.raises(DiskError, match=rf"no space left to write ids-\w+.npz in {folder}: 0.\d\d MiB free of 0.4"):
        cache.encoded(folder, tok, texts, max_length=2000, desc="tokenizing")
    assert list(folder.iterdir()) == []


# ---- a lock held by another run ------------------------------------------------------------------
HOLD = (
    "import sys, time; from transformer_attention.files import hold_lock, release_lock\n"
    "lock = hold_lock(sys.argv[1]); print('held', flush=True); time.sleep(float(sys.argv[2])); release_lock(lock)"
)


def test_waiting_for_a_lock_says_once_which_process_holds_it(tmp_path: Path, caplog):
    path = tmp_path / "mlm-key.lock"
    hold_for = 1.5
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), str(hold_for)], stdout=subprocess.PIPE, text=True, env=entry_env()
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.time()
        with caplog.at_level(logging.INFO, logger="transformer_attention.files"):
            lock = hold_lock(path, wait=True)
        waited = time.time() - start
    finally:
        holder.kill()
        holder.wait()
    try:
        (record,) = [r for r in caplog.records if "waits" in r.getMessage()]
        assert record.levelno == logging.INFO
        assert record.getMessage() == (
            f"{path} is held by process {holder.pid}: this run waits until that process lets go of it"
        )
        assert record.created - start < 0.5 < hold_for - 0.5 < waited  # said before waiting, then waited
        assert path.with_name(path.name + ".pid").read_text().strip() == str(os.getpid())
    finally:
        release_lock(lock)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="transformer_attention.files"):
        release_lock(hold_lock(path, wait=True))  # free: taken at once, nothing said
    assert not caplog.records
