"""`pretrain(settings, data, run)`, which `pretrain.py` and `train.py model.init_from=pretrain` both run, and
`METHODS`: how each `pretrain.method` makes its result, what it depends on (the cache key), its file kind."""

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
    """`make` trains and returns the file it wrote in the run's folder, a function of what `depends_on` returns
    (parts, and the texts apart); `what` names it in messages; `try_targets` tries its `_target_`s before any data
    is read."""

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
    """Pretrain on `data`'s train texts (and `pretrain.extra_texts`) as `settings` say: the result cached for the
    same texts and settings when `run.reuse` and there is one, else made now in `run.output_dir` and cached."""
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
        what = method.what
        if run.reuse and (start := store.fetch(cached)) is not None:
            log.info("model.init_from=pretrain: the %s pretrained before on the same texts and settings", what)
            return start
        if run.reuse:
            log.info("model.init_from=pretrain: no %s cached for these texts and settings; pretraining", what)
        made = method.make(settings, corpus, run)
        store.keep(made, cached)
    return read_start(made)
