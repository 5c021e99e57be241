"""The value rules of the groups a config composes, each failure a ConfigError that names the key, the bad value
and the fix: how a model is optimised, the pretraining recipe, a trainer (the run's, or train.py's
`pretrain.trainer`), the run's own keys (seed, tags), predict.py's settings, the loggers' extras. Standard
library at import time: the config is checked before torch is imported (a GPU setting imports it)."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from ..checks import is_number, is_whole
from ..errors import ConfigError


def check_training(model: dict, optimizer: dict, scheduler: dict, prefix: str = "model.") -> None:
    """The optimisation settings (`prefix`: `model.`, or `pretrain.` for pretraining's own): label smoothing,
    learning rate, warmup and floor of the schedule, the epochs the embedding is held fixed."""
    frozen = model.get("freeze_embedding_epochs")
    if frozen is not None and not is_whole(frozen, 0):
        raise ConfigError(
            f"{prefix}freeze_embedding_epochs={frozen!r} must be a whole number >= 0 (0: never held fixed): "
            f"e.g. {prefix}freeze_embedding_epochs=1"
        )
    fraction = "a number in [0, 1)"
    ranges = {  # key: (value, what it must be, the rule beyond "a number >= 0", an example)
        f"{prefix}label_smoothing": (model.get("label_smoothing"), fraction, lambda v: v < 1, 0.1),
        f"{prefix}optimizer.lr": (optimizer.get("lr"), "a positive number", lambda v: v > 0, 0.001),
        f"{prefix}scheduler.warmup_fraction": (scheduler.get("warmup_fraction"), fraction, lambda v: v < 1, 0.1),
        f"{prefix}scheduler.min_lr_ratio": (scheduler.get("min_lr_ratio"), "a number in [0, 1]", lambda v: v <= 1, 0),
    }
    for key, (value, allowed, ok, example) in ranges.items():
        if value is not None and (not is_number(value) or value < 0 or not ok(value)):
            raise ConfigError(f"{key}={value!r} must be {allowed}: e.g. {key}={example}")


def check_pretrain(pretrain: dict, init_from: Any) -> None:
    """The pretraining recipe (`pretrain.*`, conf/pretrain) and `model.init_from`: checked before any data is
    read or tokenizer trained."""
    rules = {  # key: (is the value allowed, what it must be, an example)
        "mask_prob": (lambda v: is_number(v) and 0 < v < 1, "a number in (0, 1)", 0.15),
        "holdout": (lambda v: is_number(v) and 0 < v < 1, "a number in (0, 1)", 0.02),
        "dropout": (lambda v: is_number(v) and 0 <= v < 1, "a number in [0, 1)", 0.0),
        "max_length": (lambda v: is_whole(v, 2), "a whole number >= 2", 128),
        "batch_size": (lambda v: is_whole(v, 1), "a whole number >= 1", 64),
        "extra_texts": (
            lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v),
            "a list of files, folders or hub names",
            "[../shared/data/imdb]",
        ),
    }
    for key, (ok, allowed, example) in rules.items():
        if key in pretrain and not ok(pretrain[key]):
            raise ConfigError(f"pretrain.{key}={pretrain[key]!r} must be {allowed}: e.g. pretrain.{key}={example}")
    method = pretrain.get("method", "mlm")
    if method not in METHODS:
        raise ConfigError(f"pretrain.method={method!r} is not a pretraining method: use one of {', '.join(METHODS)}")
    check_skipgram(pretrain.get("skipgram") or {})
    if init_from is not None and init_from != "pretrain" and not os.path.isfile(str(init_from)):
        raise ConfigError(
            f"model.init_from={init_from!r} is not a file: give a checkpoint pretrain.py wrote "
            "(outputs/pretrain/runs/<time>/checkpoints/mlm_<step>.ckpt, or vectors.npz with pretrain.method=skipgram), "
            "or model.init_from=pretrain to pretrain first"
        )


METHODS = ("mlm", "skipgram")


def check_skipgram(skipgram: dict) -> None:
    """`pretrain.skipgram.*`: gensim's Word2Vec settings, each a whole number in range (sample: a fraction)."""
    lowest = {"dim": 2, "window": 1, "negative": 1, "epochs": 1, "min_count": 1, "workers": 1}
    examples = {"dim": 128, "window": 5, "negative": 5, "epochs": 10, "min_count": 5, "workers": 1}
    known = [*lowest, "sample"]
    for key, value in skipgram.items():
        if key not in known:
            raise ConfigError(
                f"pretrain.skipgram.{key} is not a skip-gram setting: the settings are {', '.join(known)}"
            )
        if value is None and key in ("dim", "workers"):
            continue  # dim: model.d_model; workers: the free cores
        if key == "sample":
            ok, allowed, example = is_number(value) and 0 <= value < 1, "a number in [0, 1)", 0.0001
        else:
            ok, allowed, example = is_whole(value, lowest[key]), f"a whole number >= {lowest[key]}", examples[key]
        if not ok:
            raise ConfigError(
                f"pretrain.skipgram.{key}={value!r} must be {allowed}: e.g. pretrain.skipgram.{key}={example}"
            )


# what Lightning takes, plus this project's `auto` (training/precision.py)
PRECISIONS = ("auto", "32-true", "bf16-mixed", "16-mixed", "bf16-true", "16-true", "64-true", "32", "16", "bf16", "64")


def check_trainer(trainer: dict, prefix: str) -> None:
    """Whole-number loop settings (Lightning checks them only when fit starts), the precision, and a GPU
    that exists; `prefix` names the trainer (`trainer.`, or `pretrain.trainer.` for train.py's pretraining)."""
    lowest = {"max_epochs": -1, "min_epochs": 0, "log_every_n_steps": 1, "check_val_every_n_epoch": 1, "num_nodes": 1}
    for key, low in lowest.items():
        value = trainer.get(key)
        if value is not None and not is_whole(value, low):
            raise ConfigError(f"{prefix}{key}={value!r} must be a whole number >= {low}: e.g. {prefix}{key}=1")
    if trainer.get("max_epochs") == 0:
        raise ConfigError(
            f"{prefix}max_epochs=0 trains nothing: use {prefix}max_epochs=1 or more (-1: no limit), "
            "or train=false to test the weights as they are"
        )
    interval = trainer.get("val_check_interval")
    if interval is not None and not (is_whole(interval, 1) or (is_number(interval) and 0 < interval <= 1)):
        raise ConfigError(
            f"{prefix}val_check_interval={interval!r} must be a fraction of an epoch in (0, 1] or a whole number of "
            f"batches >= 1: e.g. {prefix}val_check_interval=0.25"
        )
    precision = trainer.get("precision")
    if precision is not None and str(precision) not in PRECISIONS:
        raise ConfigError(
            f"{prefix}precision={precision!r} must be one of {', '.join(PRECISIONS[:6])}: e.g. {prefix}precision=auto "
            "(the faster of 32-true and bf16-mixed, timed at start)"
        )
    accelerator = trainer.get("accelerator")
    devices = trainer.get("devices")
    strategy = trainer.get("strategy", "auto")
    strategy = str(strategy.get("_target_", strategy) if isinstance(strategy, dict) else strategy).rsplit(".", 1)[-1]
    if precision == "auto" and (devices not in (1, "1", None) or "ddp" in strategy.lower()):
        raise ConfigError(
            f"{prefix}precision=auto times one process, not {devices} device(s) (strategy {strategy}): "
            f"set {prefix}precision=32-true or {prefix}precision=bf16-mixed"
        )
    if accelerator == "cpu" and is_whole(devices):
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        if devices > cores:
            raise ConfigError(
                f"{prefix}devices={devices} CPU processes but this machine gives this run {cores} core(s): "
                f"use {prefix}devices={cores} or fewer (each process is one DDP rank)"
            )
    if accelerator not in ("gpu", "cuda"):
        return
    import torch  # only for a GPU run

    visible = torch.cuda.device_count()
    if not torch.cuda.is_available():
        raise ConfigError(
            f"{prefix}accelerator={accelerator} but no CUDA GPU is visible here: "
            "use trainer=cpu (or trainer=ddp_cpu for 2 processes on CPU)"
        )
    if isinstance(devices, int) and devices > visible:
        raise ConfigError(
            f"{prefix}devices={devices} but only {visible} GPU(s) are visible: "
            f"use {prefix}devices={visible} (or {prefix}devices=auto)"
        )


DEVICE = ("cpu", "cuda", "mps")


def check_run(values: dict) -> None:
    """The run's own keys: `seed`, `tags`, and predict.py's `batch_size`, `max_length` and `device`."""
    seed = values.get("seed")
    if seed is not None and not is_whole(seed, 0):
        raise ConfigError(f"seed={seed!r} must be a whole number >= 0 (or null: no seeding): e.g. seed=42")
    tags = values.get("tags")
    if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str | int | float) for t in tags)):
        raise ConfigError(f"tags={tags!r} must be a list of words: e.g. tags=[baseline,heads8]")
    if "batch_size" in values and not is_whole(values["batch_size"], 1):  # predict.py's
        raise ConfigError(f"batch_size={values['batch_size']!r} must be a whole number >= 1: e.g. batch_size=64")
    device = values.get("device")
    if device is None:
        return
    kind, _, index = str(device).partition(":")
    if kind not in DEVICE or (index and not index.isdigit()):
        raise ConfigError(f"device={device!r} is not a device: use cpu, cuda, cuda:1 (a GPU's number) or mps")
    if kind == "cuda":
        import torch  # only for a GPU

        if not torch.cuda.is_available():
            raise ConfigError(f"device={device} but this torch sees no CUDA GPU (a CPU build, or none): use device=cpu")
        if index and int(index) >= torch.cuda.device_count():
            visible = torch.cuda.device_count()
            raise ConfigError(
                f"device={device} but {visible} GPU(s) are visible: use device=cuda:0 to cuda:{visible - 1}"
            )


EXTRAS = {"MLFlowLogger": ("mlflow", "mlflow"), "WandbLogger": ("wandb", "wandb")}  # logger: (module, extra)


def check_loggers(loggers: dict) -> None:
    """A logger whose package is not installed names the project's extra that brings it."""
    for name, entry in loggers.items():
        target = str((entry or {}).get("_target_", "")) if isinstance(entry, dict) else ""
        for cls, (module, extra) in EXTRAS.items():
            if target.endswith(cls) and importlib.util.find_spec(module) is None:
                raise ConfigError(
                    f"logger={name} needs {module}, which is not installed: pip install -e '.[{extra}]' "
                    f"(or leave it out: logger.{name}=null)"
                )
