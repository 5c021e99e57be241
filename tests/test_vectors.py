"""Skip-gram word vectors (`pretrain.method=skipgram`): trained with gensim on the pretraining corpus (no
evaluated text, extra texts by split name), cached, and copied into the embedding exactly as stated (centred,
scaled to the init, [PAD] zero, the rest untouched), held fixed for `model.freeze_embedding_epochs`."""

from __future__ import annotations

import csv
import logging
import signal
import subprocess
import sys
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from conftest import ROOT, TINY, entry_env, popen_warm, run_dirs, run_entry, run_warm

from transformer_attention.data.datamodule import ReviewDataModule
from transformer_attention.data.tokenizer import FIRST_WORD_ID, PAD_ID
from transformer_attention.data.unlabelled import PretrainingData, load_texts, normalized
from transformer_attention.errors import CheckpointError, ConfigError, DataError
from transformer_attention.model import TransformerClassifier
from transformer_attention.module import ClassifierModule
from transformer_attention.pretraining.skipgram import skipgram_corpus, train_vectors
from transformer_attention.pretraining.vectors import WordVectors

WORDS = "good great fine bad awful poor film plot acting story".split()


def write_csv(path: Path, texts: list[str], labels: bool = True) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"] if labels else ["text"])
        writer.writerows([(t, i % 2) if labels else (t,) for i, t in enumerate(texts)])
    return path


def reviews(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(4, 12)))) + f" r{seed}x{i}" for i in range(n)]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A labelled set (train / validation / test) and, beside it, an unlabelled `unsupervised.csv` that repeats
    one validation text and one test text (other case and spacing)."""
    data = tmp_path / "reviews"
    data.mkdir()
    train, val, test = reviews(60, 1), reviews(20, 2), reviews(20, 3)
    write_csv(data / "train.csv", train)
    write_csv(data / "validation.csv", val)
    write_csv(data / "test.csv", test)
    unlabelled = [*reviews(80, 4), f"  {val[0].upper()} ", test[1].replace(" ", "   ")]
    write_csv(data / "unsupervised.csv", unlabelled, labels=False)
    return data


def test_extra_texts_name_a_split_of_a_local_folder_and_a_missing_split_is_named(folder: Path):
    texts = load_texts(f"{folder}:unsupervised")
    assert len(texts) == 82 and texts[0].endswith("r4x0")
    assert load_texts(str(folder)) == load_texts(f"{folder}:train")  # the train split, as before
    with pytest.raises(DataError, match=r"holds no extra\.\* data file .* name the file extra\.parquet"):
        load_texts(f"{folder}:extra")


def test_the_corpus_is_train_plus_the_named_split_and_never_an_evaluated_text(folder: Path, caplog):
    data = ReviewDataModule(name="local", path=str(folder), max_length=32, vocab_size=200, min_frequency=1)
    with caplog.at_level(logging.WARNING):
        tokenizer, texts = skipgram_corpus(PretrainingData(data, extra_texts=[f"{folder}:unsupervised"]))
    raw = data.load()
    used = {normalized(t) for t in texts}
    evaluated = {normalized(t) for split in ("validation", "test") for t in raw[split]["text"]}
    assert not used & evaluated
    assert len(texts) == 60 + 80  # train and the unsupervised split, less its two evaluated texts
    assert "dropped 2 of 82" in caplog.text
    # the run's own tokenizer: trained on the train split, as a run without vectors trains it
    assert tokenizer.to_str() == data.train_tokenizer().to_str()


def test_one_worker_trains_the_same_vectors_twice_and_special_ids_get_none():
    rng = np.random.default_rng(0)
    rows = [np.concatenate([[2], rng.integers(FIRST_WORD_ID, 40, size=20)]).astype(np.int32) for _ in range(200)]
    first, known = train_vectors(rows, vocab_size=50, dim=8, epochs=2, workers=1, min_count=1)
    again, _ = train_vectors(rows, vocab_size=50, dim=8, epochs=2, workers=1, min_count=1)
    assert first.shape == (50, 8) and np.array_equal(first, again)
    assert not known[:FIRST_WORD_ID].any() and not known[40:].any() and known[FIRST_WORD_ID:40].all()
    assert not first[~known].any()


VECTORS_IN_A_PROCESS = """
import hashlib, sys
import numpy as np
from transformer_attention.pretraining.skipgram import train_vectors
rng = np.random.default_rng(0)
rows = [np.concatenate([[2], rng.integers(4, 60, size=20)]).astype(np.int32) for _ in range(300)]
vectors, _ = train_vectors(rows, vocab_size=64, dim=8, epochs=2, min_count=1, seed=int(sys.argv[1]))
print(hashlib.sha256(vectors.tobytes()).hexdigest())
"""


def test_the_default_vectors_are_the_same_bits_in_every_process_and_under_load(tmp_path):
    """The default (one worker, gensim seeded through a hash that is the same in every process): two interpreter
    launches with different PYTHONHASHSEED, one of them beside a process that keeps a core busy, give the same
    vectors bit for bit; another `pretrain.seed` gives others."""

    def digest(seed: int, hash_seed: str) -> str:
        env = {**entry_env(), "PYTHONHASHSEED": hash_seed}
        command = [sys.executable, "-c", VECTORS_IN_A_PROCESS, str(seed)]
        return subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout.strip()

    first = digest(0, "1")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        again = digest(0, "2")
    finally:
        busy.kill()
        busy.wait()
    assert first == again
    assert digest(1, "1") != first


def fake_vectors(vocab: int = 30, dim: int = 8, seed: int = 0) -> WordVectors:
    data = ReviewDataModule(name="toy", toy_size=200, vocab_size=vocab, min_frequency=1)
    tokenizer = data.train_tokenizer()
    V = tokenizer.get_vocab_size()
    rng = np.random.default_rng(seed)
    known = rng.random(V) < 0.7
    known[:FIRST_WORD_ID] = False
    vectors = np.where(known[:, None], rng.normal(3.0, 2.0, size=(V, dim)), 0).astype(np.float32)
    return WordVectors(vectors, known, tokenizer.to_str(), {"dim": dim})


def test_copy_into_writes_the_centred_scaled_rows_keeps_pad_zero_and_the_rest_as_initialised(tmp_path: Path):
    vectors = WordVectors.load(fake_vectors().save(tmp_path / "vectors.npz"))  # the round trip too
    V, D = vectors.vectors.shape
    torch.manual_seed(0)
    net = TransformerClassifier(vocab_size=V, num_classes=2, pad_id=PAD_ID, d_model=D, num_heads=2, num_layers=1)
    before = net.embedding.weight.detach().clone()
    assert vectors.copy_into(net) == ["embedding.weight"]
    after = net.embedding.weight.detach()
    known = vectors.known
    # the stated transform, in NumPy: centred on the known rows' mean, global element std D ** -0.5
    rows = vectors.vectors[known].astype(np.float64)
    centred = rows - rows.mean(axis=0)
    expected = centred * (D**-0.5 / centred.std(ddof=1))
    np.testing.assert_allclose(after[torch.from_numpy(known)].numpy(), expected, rtol=1e-5, atol=1e-7)
    assert not after[PAD_ID].any()
    unknown = torch.from_numpy(~known)
    unknown[PAD_ID] = False
    assert torch.equal(after[unknown], before[unknown])


def test_a_vectors_file_of_another_size_or_damaged_is_a_one_line_error(tmp_path: Path):
    path = fake_vectors(dim=8).save(tmp_path / "vectors.npz")
    with pytest.raises(ConfigError, match=r"dimension 8 but the config says model\.d_model=16: set model\.d_model=8"):
        WordVectors.load(path).check_fits({"d_model": 16})
    for content in (b"", b"garbage" * 10, path.read_bytes()[:100]):
        bad = tmp_path / "bad.npz"
        bad.write_bytes(content)
        with pytest.raises(CheckpointError, match="is not a word-vectors file: give a vectors.npz"):
            WordVectors.load(bad)


def test_a_frozen_embedding_is_bit_equal_after_the_frozen_epochs_and_trains_after(tmp_path: Path):
    data = ReviewDataModule(name="toy", toy_size=200, max_length=32, batch_size=32, vocab_size=100, min_frequency=1)
    data.setup("fit")
    L.seed_everything(0)
    module = ClassifierModule(
        vocab_size=data.vocab_size, num_classes=2, freeze_embedding_epochs=1, d_model=16, num_heads=2,
        num_layers=1, dim_feedforward=32, dropout=0.0,
    )  # fmt: skip
    seen = []

    class Record(L.Callback):
        def on_train_epoch_end(self, trainer, pl_module):
            seen.append((pl_module.net.embedding.weight.detach().clone(), pl_module.net.head.weight.detach().clone()))

    start = (module.net.embedding.weight.detach().clone(), module.net.head.weight.detach().clone())
    trainer = L.Trainer(
        max_epochs=2, callbacks=[Record()], logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, default_root_dir=tmp_path, limit_val_batches=0,
    )  # fmt: skip
    trainer.fit(module, datamodule=data)
    (emb1, head1), (emb2, _) = seen
    assert torch.equal(emb1, start[0])  # epoch 1: the embedding did not move ...
    assert not torch.equal(head1, start[1])  # ... while the rest trained
    assert not torch.equal(emb2, emb1)  # epoch 2: it trains


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "pretrain.method=word2vec",
            "pretrain.method='word2vec' is not a pretraining method: use one of mlm, skipgram",
        ),
        ("pretrain.skipgram.window=0", "pretrain.skipgram.window=0 must be a whole number >= 1"),
        ("+pretrain.skipgram.size=64", "pretrain.skipgram.size is not a setting of the skip-gram vectors"),
        ("model.freeze_embedding_epochs=-1", "model.freeze_embedding_epochs=-1 must be a whole number >= 0"),
    ],
)
def test_bad_skipgram_settings_fail_in_one_line_before_any_data_is_read(tiny_overrides, override, message):
    proc = run_entry("train.py", *tiny_overrides, override, check=False)
    assert proc.returncode == 1
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert "tokenizing" not in proc.stderr + proc.stdout


@pytest.mark.slow
def test_train_from_pretrain_trains_vectors_once_and_starts_from_exactly_their_rows(folder: Path, tmp_path: Path):
    """model.init_from=pretrain with pretrain.method=skipgram: the first run trains and caches the vectors, a
    second run (another seed) reuses them; with the embedding frozen for the one epoch trained, the checkpoint's
    embedding is the vectors' rows as stated."""
    log_dir = tmp_path / "outputs"
    args = [
        *[o for o in TINY if not o.startswith("data.")], "data=local", f"data.path={folder}", "data.vocab_size=200",
        "data.min_frequency=1", "model.init_from=pretrain", "pretrain.method=skipgram",
        "model.freeze_embedding_epochs=1",
        f"pretrain.extra_texts=[{folder}:unsupervised]", "pretrain.skipgram.epochs=2", "pretrain.skipgram.min_count=1",
        "pretrain.skipgram.workers=1", "callbacks.attention_maps=null", f"paths.log_dir={log_dir}",
    ]  # fmt: skip
    first = run_warm("train.py", *args)
    assert "no word vectors cached for these texts and settings" in first.stdout + first.stderr
    (cached,) = (log_dir / ".cache" / "pretrained").glob("skipgram-*.npz")
    (made,) = run_dirs(log_dir, "pretrain")
    assert (made / "vectors.npz").read_bytes() == cached.read_bytes()  # kept in its run folder too
    vectors = WordVectors.load(cached)
    (run,) = run_dirs(log_dir, "train")
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    embedding = ckpt["state_dict"]["net.embedding.weight"]
    assert torch.equal(embedding[torch.from_numpy(vectors.known)], vectors.rows())
    assert not embedding[PAD_ID].any()
    assert ckpt["tokenizer"] == vectors.tokenizer
    again = run_warm("train.py", *args, "seed=7", "train=false", "test=false")  # the start, without training
    assert "word vectors pretrained before on the same texts and settings" in again.stdout + again.stderr
    assert len(run_dirs(log_dir, "pretrain")) == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "signum"),
    [("pretrain.py", signal.SIGTERM), ("train.py", signal.SIGTERM), ("train.py", signal.SIGINT)],
    ids=["pretrain-SIGTERM", "train-SIGTERM", "train-Ctrl-C"],
)
def test_a_signal_during_the_skipgram_says_it_stopped_and_lets_go_of_its_locks(tmp_path: Path, script: str, signum):
    """gensim trains outside a Lightning fit: the stop is the project's own (callbacks/interrupt.py's
    stop_on_signals): one stop line with the command that starts it again, the shell's exit status, no traceback,
    and no lock left for the next run to take over (the run folder's, the cache's)."""
    log_dir = tmp_path / "outputs"
    own = [*TINY, "model.init_from=pretrain"]  # pretrain.py takes no trainer.*: it runs pretrain.trainer
    own = [o for o in TINY if not o.startswith("trainer.")] if script == "pretrain.py" else own
    args = [*own, "pretrain.method=skipgram", "pretrain.skipgram.epochs=100000", "pretrain.skipgram.workers=1",
            f"paths.log_dir={log_dir}"]  # fmt: skip
    proc = popen_warm(ROOT / script, *args, cwd=tmp_path)  # a forked process: signalled as one a shell started
    try:
        seen = []
        for line in proc.stdout:  # the console log: wait until the vectors are being trained
            seen.append(line)
            if "skip-gram: epoch 1/100000" in line:
                break
        assert proc.poll() is None, "".join(seen)[-3000:] + proc.stderr.read()[-3000:]
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(seen) + out
    assert proc.returncode == 128 + signum, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    assert f"{name}: stopped the skip-gram vectors in epoch " in out + err
    assert f"start it again with:\n  python {script} " in out + err
    assert not list(log_dir.rglob("*.pid")), list(log_dir.rglob("*"))  # every lock let go: none stale
