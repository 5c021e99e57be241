"""`pretrain(settings, data, run)`: the one pretraining that `python pretrain.py` and `python train.py
model.init_from=pretrain` both run, and `METHODS`, the table of what each `pretrain.method` does: how it makes its
result (a file in the pretraining's own folder), what that result depends on (the cache key), and its file kind.
What comes back is a `Start` (start.py), whichever the method."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..data.datamodule import ReviewDataModule
from ..data.unlabelled import PretrainingData
from . import mlm, skipgram, store
from .settings import PretrainConfig, PretrainRun
from .start import Start, read_start

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Method:
    """One way to pretrain: `make` trains and returns the file it wrote in the run's folder; `depends_on` says what
    that file is a function of (parts, and the texts apart); `suffix` is its kind; `what` names it in messages;
    `try_targets` tries the `_target_`s it would instantiate, before any data is read."""

    make: Callable[[PretrainConfig, PretrainingData, PretrainRun], Path]
    depends_on: Callable[[PretrainConfig, PretrainingData], tuple[tuple, list[str]]]
    suffix: str
    what: str
    try_targets: Callable[[PretrainConfig], None] | None = None


METHODS: dict[str, Method] = {
    "mlm": Method(
        make=mlm.make_encoder, depends_on=mlm.depends_on, suffix=".ckpt", what="encoder", try_targets=mlm.try_targets
    ),
    "skipgram": Method(make=skipgram.make_vectors, depends_on=skipgram.depends_on, suffix=".npz", what="word vectors"),
}


def pretrain(settings: PretrainConfig, data: ReviewDataModule, run: PretrainRun) -> Start:
    """Pretrain on `data`'s train texts (plus `pretrain.extra_texts`) as `settings` say: the result cached for the same
    texts and settings when `run.reuse` and there is one, else made now in `run.output_dir` and cached."""
    method = METHODS[settings.method]
    if method.try_targets is not None:
        method.try_targets(settings)
    corpus = PretrainingData(
        data,
        extra_texts=list(settings.extra_texts),
        text_column=settings.text_column,
        max_length=settings.max_length,
        batch_size=settings.batch_size,
        holdout=settings.holdout,
        seed=settings.seed,
    )
    parts, texts = method.depends_on(settings, corpus)
    cached = store.cached_path(run.cache_dir, settings.method, parts, texts, method.suffix)
    with store.locked(cached):
        if run.reuse and (start := store.fetch(cached)) is not None:
            log.info("model.init_from=pretrain: the %s pretrained before on the same texts and settings, %s",
                     method.what, cached)  # fmt: skip
            return start
        if run.reuse:
            log.info("model.init_from=pretrain: no %s cached for these texts and settings; pretraining in %s",
                     method.what, run.output_dir)  # fmt: skip
        made = method.make(settings, corpus, run)
        store.keep(made, cached)
    return read_start(made)
