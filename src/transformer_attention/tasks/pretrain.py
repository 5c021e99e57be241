"""`python pretrain.py`: pretrain the encoder as a masked language model (or, with `pretrain.method=skipgram`,
train skip-gram word vectors for its embedding: vectors.npz), in this run's folder, and keep the
best checkpoint in the cache too, where `python train.py model.init_from=pretrain` finds it for the same
texts and settings. Built as a training run is: the trainer, callbacks and logger groups (conf/trainer/pretrain,
conf/callbacks/pretrain, conf/logger) take the same overrides (`trainer.max_epochs=1`, `logger=csv`, ...)."""

from __future__ import annotations

import signal
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig

from ..errors import ConfigError
from ..pretraining import ARCHITECTURE
from ..training.pretrained import cache_path, pretrain, pretraining_data, store
from ..training.vectors import VECTORS_FILE, skipgram_vectors, vectors_cache_path

OWN_OVERRIDES = ("pretrain.", "trainer.", "callbacks.", "logger", "tags", "hydra")  # not the fine-tuning's


def main(cfg: DictConfig) -> str:
    """Pretrain, cache the encoder, print the command that fine-tunes it."""
    if cfg.model.get("init_from") not in (None, "pretrain"):  # a recipe's "pretrain" is what this run does
        raise ConfigError(f"model.init_from={cfg.model.init_from!r} is for train.py: pretrain.py starts from scratch")
    given = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    data = pretraining_data(cfg)
    skipgram = cfg.pretrain.get("method", "mlm") == "skipgram"
    if skipgram:  # word vectors for the embedding: gensim, no Lightning loop
        best = skipgram_vectors(cfg, data).save(Path(cfg.paths.output_dir) / VECTORS_FILE)
        store(best, vectors_cache_path(cfg, data))
    else:
        try:
            best = pretrain(cfg, data=data)
        except SIGTERMException as stop:  # SIGTERM or Ctrl-C: last.ckpt is saved, the resume command logged
            raise SystemExit(stop.code if stop.code is not None else 128 + signal.SIGTERM) from None
        store(best, cache_path(cfg, data))
    # the command to fine-tune it: this run's own overrides (data, model sizes), pretraining's own left out
    kept = [o for o in given if not o.lstrip("+~").startswith(OWN_OVERRIDES)]
    named = {o.split("=", 1)[0] for o in kept}
    fitting = ("d_model",) if skipgram else ARCHITECTURE  # vectors fix the embedding's size only
    sizes = [f"model.{k}={str(cfg.model.get(k)).lower()}" for k in fitting if f"model.{k}" not in named]
    what = "word vectors" if skipgram else "pretrained encoder"
    print(f"{what}: {best}\nfine-tune it: python train.py {' '.join([*kept, *sizes])} model.init_from={best}")
    return str(best)
