"""Real review data from ../shared/data (skipped when absent) and the entry point on it; offline hub names."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from conftest import ROOT, SHARED_DATA, TINY, entry_env, run_warm

from transformer_attention.data import ReviewDataModule

TINY_REAL = [o for o in TINY if not o.startswith("data.toy_size")]  # toy_size is the toy config's key
needs_shared = pytest.mark.skipif(
    not (SHARED_DATA / "rotten_tomatoes").is_dir() or not (SHARED_DATA / "imdb").is_dir(),
    reason=f"shared review data not found at {SHARED_DATA} (rotten_tomatoes/, imdb/ parquet files)",
)


@pytest.mark.slow
@needs_shared
def test_train_entry_on_rotten_tomatoes_end_to_end(tmp_path):
    proc = run_warm(
        "train.py",
        *TINY_REAL,
        "data=rotten_tomatoes",
        f"data.path={SHARED_DATA / 'rotten_tomatoes'}",
        "trainer.limit_train_batches=5",
        "trainer.limit_val_batches=2",
        "trainer.limit_test_batches=2",
        f"paths.log_dir={tmp_path}",
    )
    acc = re.search(r"^\s+test/acc\s+([\d.]+)$", proc.stdout, flags=re.M)
    assert acc and 0.0 <= float(acc.group(1)) <= 1.0
    (run,) = (tmp_path / "train" / "runs").iterdir()
    assert (run / "tokenizer.json").is_file()
    assert (run / "label_names.json").read_text().strip() == '["negative", "positive"]'
    assert any((tmp_path / ".cache").glob("ids-*.npz"))


@needs_shared
def test_imdb_has_a_carved_validation_split_and_the_test_split_apart():
    dm = ReviewDataModule(name="local", path=str(SHARED_DATA / "imdb"), val_fraction=0.1)
    raw = dm._load_raw()  # loading and checks only: tokenizing 50k reviews belongs to the benchmark
    assert {k: len(v["text"]) for k, v in raw.items()} == {"train": 22476, "test": 25000, "validation": 2500}
    train, val = set(raw["train"]["text"]), set(raw["validation"]["text"])
    duplicated = 25000 - len(train | val)  # IMDB repeats some reviews: the train copies of validation ones are gone
    assert not train & val and duplicated < 200
    assert 0.4 < sum(raw["validation"]["label"]) / 2500 < 0.6  # carved at random from label-sorted rows


def test_offline_hub_name_fails_at_once_with_the_local_fix(tmp_path):
    # an empty HF cache: where imdb is cached the load would succeed and a real training would start
    env = {**entry_env(), "HF_HOME": str(tmp_path / "hf"), "HF_DATASETS_CACHE": str(tmp_path / "hf" / "datasets")}
    cmd = [sys.executable, str(ROOT / "train.py"), *TINY_REAL, "data=imdb", f"paths.log_dir={tmp_path}"]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and time.monotonic() - start < 60
    err = proc.stderr
    assert "data.name='stanfordnlp/imdb' could not be loaded from the Hugging Face hub" in err
    assert "offline mode is on" in err and "data.data_files=" in err
    assert "data.path=<a folder holding imdb as train/validation/test" in err  # no folder of this machine's
