"""The encoder a run starts from (`model.init_from`), and the pretraining run that makes one.

`model.init_from=<file>` reads a pretrain.py checkpoint (or its skip-gram vectors.npz, training/vectors.py);
`model.init_from=pretrain` takes the encoder (or vectors: `pretrain.method`) cached for the run's texts and
settings, or pretrains it now (in outputs/pretrain/runs/<time>/) and caches it. Either way the MLM pretraining
is `pretrain(cfg)`, the run `python pretrain.py` makes too: the data and model sizes of `cfg`,
its `pretrain` recipe, and its trainer, callbacks and logger groups, built as a training run's are. In train.py
those groups are `pretrain.trainer`, `pretrain.callbacks` and `pretrain.logger` (`pretraining_config` puts them
where pretrain.py has them).
"""

from __future__ import annotations

import copy
import logging
import shutil
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import lightning as L
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from ..data import cache
from ..data.unlabelled import PretrainingData
from ..errors import CheckpointError, ConfigError, DiskError
from ..files import atomic_write, hold_lock, release_lock
from ..model.config import encoder_fields
from ..pretraining import ARCHITECTURE, MaskedLMModule, PretrainedEncoder
from .builders import TrainerBuilder, build_loggers, instantiate_group, logged_metrics
from .checkpoint import load_encoder, read_checkpoint
from .hparams import log_run
from .resume import Resume, check_epochs_left
from .vectors import VECTORS_FILE, WordVectors, skipgram_vectors, vectors_cache_path

log = logging.getLogger(__name__)

# trainer settings that say where and how fast, not what is learnt: left out of the cache key
NOT_LEARNT = (
    "_target_", "default_root_dir", "precision", "accelerator", "devices", "num_nodes", "strategy",
    "enable_progress_bar", "enable_model_summary", "log_every_n_steps", "detect_anomaly", "profiler", "benchmark",
)  # fmt: skip


Start = PretrainedEncoder | WordVectors  # what model.init_from gives: an MLM encoder, or skip-gram vectors


def starting_encoder(cfg: DictConfig, resume: Resume) -> Start | None:
    """The pretrained encoder or word vectors `model.init_from` names (None: from scratch, or a resumed run,
    which has its own weights), checked to fit the config's sizes; `pretrain` pretrains first unless the cache
    has it."""
    init_from = cfg.model.get("init_from")
    if not init_from or resume:
        return None
    encoder = cached_encoder(cfg) if str(init_from) == "pretrain" else read_start(str(init_from))
    encoder.check_fits(OmegaConf.to_container(cfg.model, resolve=True))
    return encoder


def read_start(path: str | Path) -> Start:
    """A pretrain.py result: word vectors (.npz) or an MLM checkpoint."""
    return WordVectors.load(path) if str(path).endswith(".npz") else load_encoder(path)


def cached_encoder(cfg: DictConfig) -> Start:
    """`model.init_from=pretrain`: what `pretrain.method` makes (an encoder, or word vectors) for this data,
    tokenizer and pretraining, from the cache, or made now if there is none yet, or if the cached one fails to
    load (then moved aside: `cache.set_aside`). Parallel sweep jobs (hydra/launcher=joblib) wait for the one that
    pretrains."""
    data = pretraining_data(cfg)
    skipgram = cfg.pretrain.get("method", "mlm") == "skipgram"
    cached = vectors_cache_path(cfg, data) if skipgram else cache_path(cfg, data)
    what = "word vectors" if skipgram else "encoder"
    lock = hold_lock(cached.with_suffix(".lock"), wait=True)
    try:
        if (encoder := _read_cached(cached)) is not None:
            log.info(
                "model.init_from=pretrain: the %s pretrained before on the same texts and settings, %s", what, cached
            )
            return encoder
        stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S-%f")
        out_dir = Path(cfg.paths.log_dir) / "pretrain" / "runs" / stamp
        log.info(
            "model.init_from=pretrain: no %s cached for these texts and settings; pretraining in %s", what, out_dir
        )
        if skipgram:
            best = skipgram_vectors(cfg, data).save(out_dir / VECTORS_FILE)
        else:
            best = pretrain(pretraining_config(cfg, out_dir), data=data, own_overrides=False)
        store(best, cached)
    finally:
        release_lock(lock)
    if cfg.get("seed") is not None:  # pretraining seeds with its own seed: the fine-tuning starts from `seed`
        L.seed_everything(cfg.seed, workers=True)
    return read_start(cached)


def _read_cached(cached: Path) -> Start | None:
    """The cached encoder or vectors, or None if there is none or it fails to load (then it is set aside)."""
    if not cached.exists():
        return None
    seen = cached.stat()
    try:
        return read_start(cached)
    except Exception as err:  # CheckpointError, or whatever else a damaged file makes torch raise
        cache.set_aside(cached, cache.failure(err, seen.st_size, cached), seen)
        return None


def pretraining_config(cfg: DictConfig, out_dir: Path) -> DictConfig:
    """train.py's config as pretrain.py would have it: `pretrain.trainer`, `.callbacks` and `.logger` as the
    trainer, callbacks and logger groups, and `out_dir` as the run's folder."""
    sub = copy.deepcopy(cfg)
    with open_dict(sub):
        for group in ("trainer", "callbacks", "logger"):
            sub[group] = sub.pretrain.pop(group)
        sub.paths.output_dir = str(out_dir)
        sub.task_name = "pretrain"
        sub.ckpt_path = None  # train.py's ckpt_path resumes the fine-tuning, never this pretraining
    return sub


def pretrain(cfg: DictConfig, data: PretrainingData | None = None, own_overrides: bool = True) -> Path:
    """Pretrain the encoder as a masked language model as `cfg` says, in `cfg.paths.output_dir`; returns the
    checkpoint with the lowest held-out MLM loss (the callbacks group's `model_checkpoint`)."""
    p = cfg.pretrain
    callbacks = instantiate_group(cfg.get("callbacks"))
    loggers = build_loggers(cfg.get("logger"))
    trainers = TrainerBuilder(cfg.trainer, callbacks, loggers)  # a bad setting fails here, before any data
    resume = cfg.get("ckpt_path")
    if resume:
        check_resumable(resume, cfg)
    data = data or pretraining_data(cfg)
    data.setup("fit")
    L.seed_everything(p.seed, workers=True)
    module = MaskedLMModule(
        vocab_size=data.vocab_size,
        pad_id=data.pad_id,
        mask_prob=p.mask_prob,
        optimizer=instantiate(p.optimizer),
        scheduler=instantiate(p.scheduler),
        tokenizer=data.tokenizer.to_str(),
        seed=p.seed,
        **encoder_settings(cfg),
    )
    trainer = trainers.for_model(module, data)
    log_run(trainer.loggers, cfg, own_overrides=own_overrides)  # no metrics: train runs define HPARAMS' columns
    start = time.perf_counter()
    trainer.fit(module, datamodule=data, ckpt_path=str(resume) if resume else None)
    best = trainer.checkpoint_callback.best_model_path
    held_out = {k: round(v, 4) for k, v in logged_metrics(trainer).items() if k.startswith("val/")}
    log.info("pretraining: %.1f min, best held-out %s, %s", (time.perf_counter() - start) / 60, held_out, best)
    return Path(best)


def check_resumable(ckpt_path: Any, cfg: DictConfig) -> None:
    """pretrain.py's `ckpt_path`: a pretrain.py checkpoint of the config's encoder sizes with an epoch left to
    train (`trainer.max_epochs`), or a CheckpointError / ConfigError that says which and the fix."""
    checkpoint = read_checkpoint(ckpt_path)
    hp = checkpoint["hyper_parameters"]
    if "mask_prob" not in hp:
        raise CheckpointError(
            f"ckpt_path={ckpt_path} is a classifier checkpoint (train.py): pretrain.py resumes its own checkpoints "
            "(outputs/pretrain/runs/<time>/checkpoints/last.ckpt); go on with this one: python train.py ckpt_path=..."
        )
    for key, want in encoder_settings(cfg).items():
        if key in ARCHITECTURE and hp.get(key) != want:
            raise ConfigError(
                f"ckpt_path={ckpt_path} was pretrained with {key}={hp.get(key)!r} but the config says "
                f"model.{key}={want!r}: set model.{key}={hp.get(key)} to resume it"
            )
    check_epochs_left(checkpoint, cfg.trainer.get("max_epochs"), ckpt_path)


def pretraining_data(cfg: DictConfig) -> PretrainingData:
    """The recipe's unlabelled text: the data group's train split plus `pretrain.extra_texts`."""
    p = cfg.pretrain
    return PretrainingData(
        instantiate(cfg.data),
        extra_texts=list(p.extra_texts or []),
        text_column=p.text_column,
        max_length=p.max_length,
        batch_size=p.batch_size,
        holdout=p.holdout,
        seed=p.seed,
    )


def encoder_settings(cfg: DictConfig) -> dict[str, Any]:
    """The encoder's settings for pretraining: the classifier's own, with the pretraining dropout."""
    model = OmegaConf.to_container(cfg.model, resolve=True)
    settings = {k: model[k] for k in encoder_fields() if k in model}
    settings["dropout"] = cfg.pretrain.dropout
    settings["max_len"] = max(settings.get("max_len", 0), cfg.pretrain.max_length)
    return settings


def cache_path(cfg: DictConfig, data: PretrainingData) -> Path:
    """Where the encoder pretrained for `cfg` is cached: keyed by what it depends on (its texts, the tokenizer
    settings, the encoder, the recipe, the trainer settings that change what is learnt)."""
    texts = data.corpus()
    d = data.data
    groups = ("trainer", "callbacks", "logger")  # train.py's: how the pretraining is run, not the recipe
    recipe = {k: _plain(v) for k, v in cfg.pretrain.items() if k not in groups}
    trainer = _plain(pretraining_trainer(cfg))
    learnt = {k: v for k, v in trainer.items() if k not in NOT_LEARNT}
    parts = (
        "mlm",
        sorted(recipe.items(), key=str),
        sorted(learnt.items(), key=str),
        sorted(encoder_settings(cfg).items()),
    )
    tokenizer = (d.vocab_size_target, d.min_frequency, d.scrub_pii, d.max_length)
    key = cache.fingerprint(*parts, tokenizer, texts=texts["train"] + ["\0"] + texts["validation"])
    return Path(cfg.paths.cache_dir) / "pretrained" / f"mlm-{key}.ckpt"


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def pretraining_trainer(cfg: DictConfig) -> DictConfig:
    """The trainer group of the pretraining `cfg` describes: train.py's `pretrain.trainer`, pretrain.py's `trainer`."""
    return cfg.pretrain.trainer if "trainer" in cfg.pretrain else cfg.trainer


def store(checkpoint: Path, cached: Path) -> None:
    """Copy `checkpoint` to `cached`, atomically (a sweep's next job may be reading the cache). A full disk is a
    DiskError that says where the pretraining's own checkpoint is kept and how to start from it."""
    try:
        with open(checkpoint, "rb") as src:
            atomic_write(cached, lambda f: shutil.copyfileobj(src, f))
    except DiskError as err:
        kept = Path(checkpoint).resolve()
        raise DiskError(
            f"{err}. The pretrained encoder was not cached, but the pretraining's own checkpoint is kept: {kept}; "
            f"start from it with model.init_from={kept} (or cache it elsewhere: paths.cache_dir=<a folder with space>)"
        ) from None
