"""Skip-gram word vectors (gensim's Word2Vec) for the classifier's embedding, `pretrain.method=skipgram`: trained
on pretraining's corpus, tokenized with the run's own tokenizer, so every id of the classifier's vocabulary is a
word."""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from ..callbacks.interrupt import stop_on_signals
from ..data import cache
from ..data.tokenizer import FIRST_WORD_ID, cut_at
from ..data.unlabelled import WHOLE_TEXT, PretrainingData
from ..threads import usable_cores
from .settings import PretrainConfig, PretrainRun, SkipgramConfig
from .vectors import FILE, WordVectors

log = logging.getLogger(__name__)


def make_vectors(settings: PretrainConfig, data: PretrainingData, run: PretrainRun) -> Path:
    """Train the vectors `settings` describe on `data`'s corpus; returns the vectors.npz written in
    `run.output_dir`."""
    tokenizer, texts = skipgram_corpus(data)
    if not data.extra_texts:
        log.warning(
            "skip-gram: no pretrain.extra_texts, so the vectors learn from the labelled train texts alone; "
            "in-domain unlabelled text (more reviews, e.g. 'pretrain.extra_texts=[<a folder of reviews>]') is what "
            "makes them worth it"
        )
    desc = "tokenizing the skip-gram corpus"
    rows, _ = cache.encoded(data.data.cache_dir, tokenizer, texts, max_length=WHOLE_TEXT, desc=desc)
    chosen = vector_settings(settings)
    vectors, known = train_vectors(rows, tokenizer.get_vocab_size(), **chosen)
    cut_at(tokenizer, data.data.max_length)  # as the classifier's run cuts it
    return WordVectors(vectors, known, tokenizer.to_str(), chosen).save(run.output_dir / FILE)


def depends_on(settings: PretrainConfig, data: PretrainingData) -> tuple[tuple, list[str]]:
    """What the vectors are a function of, for the cache key: their settings (the worker count included: with more
    than one, gensim's threads race and every training differs), the tokenizer and the corpus (returned apart:
    texts are hashed one by one)."""
    tokenizer, texts = skipgram_corpus(data)
    return (sorted(vector_settings(settings).items()), tokenizer.to_str()), texts


def vector_settings(settings: PretrainConfig) -> dict[str, Any]:
    """`pretrain.skipgram` as `train_vectors` takes it: the size resolved, the seed `pretrain.seed`."""
    return {**asdict(settings.skipgram), "dim": settings.vector_dim, "seed": settings.seed}


def skipgram_corpus(data: PretrainingData) -> tuple[Tokenizer, list[str]]:
    """(the tokenizer a run on `data` trains, on its train split; every pretraining text, held-out ones too)."""
    texts = data.corpus()
    return data.data.train_tokenizer(), texts["train"] + texts["validation"]


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
    rows: list[np.ndarray], vocab_size: int, dim: int, seed: int = 0, **settings: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Skip-gram vectors of the ids in `rows` (special ids left out): ((vocab_size, dim) float32, (vocab_size,)
    bool known). `settings`: SkipgramConfig's, its defaults where not given. With one worker they are a function of
    the rows, the settings and `seed` alone, bit for bit, in any process and under any load; more (None: the usable
    cores) train faster but differently every time: their threads race."""
    from gensim.models import Word2Vec  # imported here: only a skip-gram run needs gensim

    settings = {**asdict(SkipgramConfig()), **settings}
    del settings["dim"]
    settings["workers"] = settings["workers"] or usable_cores()
    logging.getLogger("gensim").setLevel(logging.WARNING)
    words = [str(i) for i in range(vocab_size)]  # gensim's words are strings: one shared object per id
    sentences = [[words[i] for i in row.tolist() if i >= FIRST_WORD_ID] for row in rows]
    sentences = [s for s in sentences if s]
    tokens = sum(len(s) for s in sentences)
    log.info("skip-gram: %d texts, %.2f M tokens, dim %d, %s", len(sentences), tokens / 1e6, dim, settings)
    progress = _Progress(settings["epochs"])
    with stop_on_signals(lambda: f"the skip-gram vectors in epoch {progress.epoch + 1}/{progress.epochs}"):
        model = Word2Vec(sentences, vector_size=dim, sg=1, seed=seed, callbacks=[progress], **settings)
    vectors = np.zeros((vocab_size, dim), dtype=np.float32)
    known = np.zeros(vocab_size, dtype=bool)
    for word, index in model.wv.key_to_index.items():
        vectors[int(word)] = model.wv.vectors[index]
        known[int(word)] = True
    log.info("skip-gram: %d of %d ids got a vector", int(known.sum()), vocab_size)
    return vectors, known
