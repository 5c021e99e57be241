"""Skip-gram word vectors (gensim's Word2Vec, `sg=1`) as the classifier's starting embedding:
`pretrain.method=skipgram`.

The corpus is pretraining's (`PretrainingData.corpus`: the train split after the carve plus
`pretrain.extra_texts`, never a text of an evaluated split), tokenized with the run's own tokenizer (trained on
the train split, as a run without vectors trains it), so every id of the classifier's vocabulary is a word of
the skip-gram model. `WordVectors` carries the vectors (one row per id, `known` where the id got one) and that
tokenizer in a `.npz` file of plain arrays (read with `allow_pickle=False`: no pickled code runs). Copied into
a classifier (`copy_into`) they are centred and scaled to the embedding's own init (element std
`d_model ** -0.5`); `[PAD]` stays zero, ids without a vector keep their random init.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from ..data import cache
from ..data.tokenizer import cut_at, load_tokenizer
from ..data.unlabelled import WHOLE_TEXT, PretrainingData
from ..errors import CheckpointError, ConfigError
from ..files import atomic_write
from ..model import TransformerClassifier
from ..pretraining import FIRST_WORD_ID  # [PAD] [UNK] [CLS] [MASK] are no words: never in a sentence, no vector

log = logging.getLogger(__name__)

VECTORS_FILE = "vectors.npz"  # in the run folder of `pretrain.py pretrain.method=skipgram`


@dataclass(frozen=True)
class WordVectors:
    """One vector per id of `tokenizer`'s vocabulary: `vectors` (V, dim) float32, `known` (V,) bool (the rows
    that got one; the others are zero). `settings`: how they were trained; `source` names the file in messages."""

    vectors: np.ndarray = field(repr=False)
    known: np.ndarray = field(repr=False)
    tokenizer: str = field(repr=False)
    settings: dict[str, Any] = field(default_factory=dict)
    source: str = "model.init_from"

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def save(self, path: str | Path) -> Path:
        """Write the vectors to `path` (.npz), atomically."""
        arrays = {
            "vectors": self.vectors.astype(np.float32),
            "known": self.known.astype(bool),
            "tokenizer": np.array(self.tokenizer),
            "settings": np.array(json.dumps(self.settings)),
        }
        return atomic_write(path, lambda f: np.savez(f, **arrays))

    @classmethod
    def load(cls, path: str | Path) -> WordVectors:
        """The vectors `save` wrote, checked: a CheckpointError naming the file and the fix otherwise."""
        p = Path(path).expanduser()
        fix = "give a vectors.npz that pretrain.py pretrain.method=skipgram wrote, or model.init_from=pretrain"
        try:
            with np.load(p, allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in ("vectors", "known", "tokenizer", "settings")}
            tokenizer, settings = str(arrays["tokenizer"]), json.loads(str(arrays["settings"]))
            vocab = load_tokenizer(tokenizer).get_vocab_size()
        except Exception as err:  # OSError, BadZipFile, KeyError, ValueError: whatever a damaged file makes numpy raise
            size = f"{p.stat().st_size} bytes, " if p.is_file() else ""
            raise CheckpointError(
                f"model.init_from={str(p)!r} ({size}{type(err).__name__}) is not a word-vectors file: {fix}"
            ) from None
        vectors, known = arrays["vectors"], arrays["known"]
        if vectors.ndim != 2 or known.shape != (vectors.shape[0],) or vectors.shape[0] != vocab:
            raise CheckpointError(
                f"model.init_from={str(p)!r}: {tuple(vectors.shape)} vectors for a vocabulary of {vocab} ids "
                f"(its tokenizer): the file is damaged or not this project's; {fix}"
            )
        return cls(vectors.astype(np.float32), known.astype(bool), tokenizer, settings, source=str(p))

    def check_fits(self, settings: dict[str, Any]) -> None:
        """A ConfigError when the classifier's `settings` (model.*) have another embedding size."""
        if settings.get("d_model") != self.dim:
            raise ConfigError(
                f"model.init_from={self.source!r} holds word vectors of dimension {self.dim} but the config says "
                f"model.d_model={settings.get('d_model')!r}: set model.d_model={self.dim} (or train vectors of "
                f"that size: pretrain.skipgram.dim={settings.get('d_model')})"
            )

    def rows(self) -> torch.Tensor:
        """The known rows as the embedding gets them (K, dim): centred on their mean, then scaled to the
        embedding's init scale (element std dim ** -0.5; the model multiplies by sqrt(dim))."""
        known = torch.from_numpy(self.vectors[self.known]).double()  # (K, dim)
        centred = known - known.mean(dim=0)
        return (centred * (self.dim**-0.5 / centred.std().clamp_min(1e-12))).float()

    def copy_into(self, net: TransformerClassifier) -> list[str]:
        """Write `rows()` into `net`'s token embedding at the known ids ([PAD] kept zero, the rest as
        initialised); returns the names written. The vocabulary must be the vectors' own (their tokenizer)."""
        weight = net.embedding.weight
        if tuple(weight.shape) != tuple(self.vectors.shape):
            raise ConfigError(
                f"model.init_from={self.source!r}: vectors {tuple(self.vectors.shape)} for an embedding "
                f"{tuple(weight.shape)}: the run must use the vectors' tokenizer (model.init_from gives it)"
            )
        known = torch.from_numpy(self.known)
        with torch.no_grad():
            weight[known] = self.rows().to(weight.dtype)
            weight[net.pad_id].zero_()
        log.info("model.init_from=%s: %d of %d word vectors copied into the embedding", self.source,
                 int(known.sum()), len(known))  # fmt: skip
        return ["embedding.weight"]


def free_cores() -> int:
    """The cores this process may use that no other process is running on now (at least 1)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])  # runnable tasks, this one too
    except (OSError, ValueError, IndexError):
        return cores
    return max(1, min(cores, cores - (running - 1)))


class _Progress:
    """A gensim callback: one log line per epoch (gensim's own INFO lines are many)."""

    def __init__(self, epochs: int) -> None:
        self.epochs, self.epoch, self.start = epochs, 0, time.perf_counter()

    def on_epoch_begin(self, model: Any) -> None: ...

    def on_epoch_end(self, model: Any) -> None:
        self.epoch += 1
        log.info("skip-gram: epoch %d/%d, %.0f s", self.epoch, self.epochs, time.perf_counter() - self.start)

    def on_train_begin(self, model: Any) -> None: ...

    def on_train_end(self, model: Any) -> None: ...


def train_vectors(
    rows: list[np.ndarray],
    vocab_size: int,
    dim: int,
    window: int = 5,
    negative: int = 5,
    sample: float = 1e-4,
    epochs: int = 10,
    min_count: int = 1,
    workers: int | None = None,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Skip-gram vectors (gensim Word2Vec, sg=1) of the ids in `rows` (special ids left out):
    ((vocab_size, dim) float32, (vocab_size,) bool known). One worker gives the same vectors every run."""
    from gensim.models import Word2Vec  # imported here: only a skip-gram run needs gensim

    logging.getLogger("gensim").setLevel(logging.WARNING)
    words = [str(i) for i in range(vocab_size)]  # gensim's words are strings: one shared object per id
    sentences = [[words[i] for i in row.tolist() if i >= FIRST_WORD_ID] for row in rows]
    sentences = [s for s in sentences if s]
    tokens = sum(len(s) for s in sentences)
    workers = workers or free_cores()
    log.info("skip-gram: %d texts, %.2f M tokens, dim %d, %d epochs, %d worker(s)", len(sentences), tokens / 1e6,
             dim, epochs, workers)  # fmt: skip
    model = Word2Vec(
        sentences, vector_size=dim, sg=1, window=window, negative=negative, sample=sample, epochs=epochs,
        min_count=min_count, workers=workers, seed=seed, callbacks=[_Progress(epochs)],
    )  # fmt: skip
    vectors = np.zeros((vocab_size, dim), dtype=np.float32)
    known = np.zeros(vocab_size, dtype=bool)
    for word, index in model.wv.key_to_index.items():
        vectors[int(word)] = model.wv.vectors[index]
        known[int(word)] = True
    log.info("skip-gram: %d of %d ids got a vector (min_count %d)", int(known.sum()), vocab_size, min_count)
    return vectors, known


def skipgram_settings(cfg: DictConfig) -> dict[str, Any]:
    """`pretrain.skipgram` as train_vectors takes it: dim defaults to model.d_model, the seed is pretrain.seed."""
    s = OmegaConf.to_container(cfg.pretrain.get("skipgram") or {}, resolve=True)
    s["dim"] = s.get("dim") or cfg.model.d_model
    return {**s, "seed": cfg.pretrain.seed}


def skipgram_corpus(data: PretrainingData) -> tuple[Any, list[str]]:
    """(the run's tokenizer, the corpus's texts): the tokenizer a run on `data` trains (on its train split),
    and every pretraining text (PretrainingData's train and held-out ones: none is evaluated)."""
    texts = data.corpus()
    tokenizer = data.data.train_tokenizer()
    return tokenizer, texts["train"] + texts["validation"]


def skipgram_vectors(cfg: DictConfig, data: PretrainingData) -> WordVectors:
    """Train the skip-gram vectors `cfg.pretrain` describes on `data`'s corpus (see `skipgram_corpus`)."""
    tokenizer, texts = skipgram_corpus(data)
    if not data.extra_texts:
        log.warning(
            "skip-gram: no pretrain.extra_texts, so the vectors learn from the labelled train texts alone; "
            "in-domain unlabelled text (more reviews, e.g. pretrain.extra_texts=[../shared/data/imdb]) is what "
            "makes them worth it"
        )
    rows, _ = cache.encoded(data.data.cache_dir, tokenizer, texts, WHOLE_TEXT, "tokenizing the skip-gram corpus")
    settings = skipgram_settings(cfg)
    vectors, known = train_vectors(rows, tokenizer.get_vocab_size(), **settings)
    cut_at(tokenizer, data.data.max_length)  # as the classifier's run cuts it
    return WordVectors(vectors, known, tokenizer.to_str(), settings)


def vectors_cache_path(cfg: DictConfig, data: PretrainingData) -> Path:
    """Where the vectors for `cfg` are cached: keyed by the tokenizer, the corpus and the settings (workers
    left out: how fast, not what)."""
    tokenizer, texts = skipgram_corpus(data)
    settings = {k: v for k, v in skipgram_settings(cfg).items() if k != "workers"}
    key = cache.fingerprint("skipgram", sorted(settings.items()), tokenizer.to_str(), texts=texts)
    return Path(cfg.paths.cache_dir) / "pretrained" / f"skipgram-{key}.npz"
