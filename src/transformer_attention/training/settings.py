"""The training settings and their rules, each written once: `ModelConfig` (the schema of `conf/model/`: the
encoder's `EncoderConfig` plus how ClassifierModule optimises it), the rules of an optimiser and its schedule
(`check_optimization`: `model.*` and `pretrain.*` alike) and of a Trainer (`check_trainer`: `trainer.*` and
`pretrain.trainer.*`), and the run's, the loggers' and the callbacks' (`check_run`, `check_loggers`, ...). A
dataclass checks its fields when built; the CLI builds them before torch is imported, so each failure is a
ConfigError naming the key, the bad value and the fix, in about a second. Standard library only at import time
(a GPU setting imports torch to count the GPUs)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Optional

from ..analysis.settings import known_methods
from ..checks import Rule, check_rules, is_number, is_whole, whole
from ..errors import ConfigError
from ..model.config import EncoderConfig, LossConfig, check_encoder
from ..threads import usable_cores

FRACTION = "a number in [0, 1)"
OPTIMIZER_RULES: dict[str, Rule] = {  # the keyword arguments torch's optimisers share
    "lr": (lambda v: is_number(v) and v > 0, "a positive number", 0.001),
    "weight_decay": (lambda v: is_number(v) and v >= 0, "a number >= 0 (0: no decay)", 0.01),
    "eps": (lambda v: is_number(v) and v >= 0, "a number >= 0", 1e-8),
    "momentum": (lambda v: is_number(v) and v >= 0, "a number >= 0", 0.9),
    "betas": (
        lambda v: isinstance(v, Sequence) and len(v) == 2 and all(is_number(b) and 0 <= b < 1 for b in v),
        "two numbers in [0, 1), the decay rates of the moments",
        "[0.9,0.999]",
    ),
}
SCHEDULER_RULES: dict[str, Rule] = {  # module.warmup_cosine's
    "warmup_fraction": (lambda v: is_number(v) and 0 <= v < 1, FRACTION, 0.1),
    "min_lr_ratio": (lambda v: is_number(v) and 0 <= v <= 1, "a number in [0, 1]", 0),
}


def check_optimization(optimizer: Mapping[str, Any] | None, scheduler: Mapping[str, Any] | None, prefix: str) -> None:
    """The optimiser's and the schedule's values (`prefix`: `model.`, or `pretrain.` for pretraining's own)."""
    check_rules(optimizer or {}, OPTIMIZER_RULES, f"{prefix}optimizer.")
    check_rules(scheduler or {}, SCHEDULER_RULES, f"{prefix}scheduler.")


MODULE_RULES: dict[str, Rule] = {  # ClassifierModule's own settings
    "label_smoothing": (lambda v: is_number(v) and 0 <= v < 1, FRACTION, 0.1),
    "freeze_embedding_epochs": (whole(0), "a whole number >= 0 (0: never held fixed)", 1),
    "word_dropout": (lambda v: is_number(v) and 0 <= v < 1, FRACTION, 0.1),
    "adversarial_eps": (lambda v: is_number(v) and v >= 0, "a number >= 0 (0: off)", 1.0),
    "nb_part_loss": (lambda v: is_number(v) and v >= 0, "a number >= 0 (0: off)", 1.0),
}


@dataclass
class ModelConfig(LossConfig, EncoderConfig):
    """`conf/model/`: the encoder's settings, the loss's and how ClassifierModule optimises it, checked when built."""

    _target_: str = "transformer_attention.module.ClassifierModule"
    _convert_: str = "all"  # plain lists and dicts in the hyperparameters: weights_only checkpoints
    freeze_embedding_epochs: int = 0  # hold the token embedding fixed for this many first epochs (word vectors)
    optimizer: Any = None  # a `_partial_` optimizer (params come later); None: AdamW(lr=1e-3)
    scheduler: Any = None  # a `_partial_` scheduler (optimizer, total_steps); None: warmup_cosine
    # a pretrain.py checkpoint (or its vectors.npz) to start from, or "pretrain": pretrain now as `pretrain`
    # says (or reuse what is cached for the same texts and settings); None: from scratch
    init_from: Optional[str] = None  # noqa: UP045 - OmegaConf 2.3 reads Optional

    def __post_init__(self) -> None:
        try:
            check_encoder(asdict(self), prefix="model.")
        except ValueError as err:
            raise ConfigError(str(err)) from None
        check_rules({key: getattr(self, key) for key in MODULE_RULES}, MODULE_RULES, prefix="model.")
        check_optimization(self.optimizer, self.scheduler, prefix="model.")
        init_from = self.init_from
        if init_from is not None and init_from != "pretrain" and not os.path.isfile(str(init_from)):
            raise ConfigError(
                f"model.init_from={init_from!r} is not a file: give a checkpoint pretrain.py wrote "
                "(outputs/pretrain/runs/<time>/checkpoints/mlm_<step>.ckpt, or vectors.npz with "
                "pretrain.method=skipgram), or model.init_from=pretrain to pretrain first"
            )


# what Lightning takes, plus this project's `auto` (training/precision.py)
PRECISIONS = ("auto", "32-true", "bf16-mixed", "16-mixed", "bf16-true", "16-true", "64-true", "32", "16", "bf16", "64")
LOWEST = {  # whole-number loop settings (Lightning checks most only when fit starts, some never)
    "max_epochs": -1,
    "min_epochs": 0,
    "log_every_n_steps": 1,
    "check_val_every_n_epoch": 1,
    "num_nodes": 1,
    "accumulate_grad_batches": 1,
    "max_steps": -1,
    "min_steps": 0,
    "num_sanity_val_steps": -1,
    "reload_dataloaders_every_n_epochs": 0,
}


TRAINER_RULES: dict[str, Rule] = {  # null: Lightning's default
    **{key: (whole(low, null=True), f"a whole number >= {low}", max(low, 1)) for key, low in LOWEST.items()},
    "gradient_clip_val": (
        lambda v: v is None or (is_number(v) and v >= 0),
        "a number >= 0 (0 or null: no clipping)",
        1.0,
    ),
    "gradient_clip_algorithm": (lambda v: v in (None, "norm", "value"), "norm or value (null: norm)", "value"),
    "val_check_interval": (
        lambda v: v is None or is_whole(v, 1) or (is_number(v) and 0 < v <= 1),
        "a fraction of an epoch in (0, 1] or a whole number of batches >= 1",
        0.25,
    ),
    "precision": (
        lambda v: v is None or str(v) in PRECISIONS,
        f"one of {', '.join(PRECISIONS[:6])}",
        "auto (the faster of 32-true and bf16-mixed, timed at start)",
    ),
}


def check_trainer(trainer: Mapping[str, Any], prefix: str) -> None:
    """A Trainer's values (`prefix`: `trainer.`, or `pretrain.trainer.`): whole-number loop settings, clipping, the
    validation interval, the precision, and devices that exist."""
    check_rules(trainer, TRAINER_RULES, prefix)
    if trainer.get("max_epochs") == 0:
        raise ConfigError(
            f"{prefix}max_epochs=0 trains nothing: use {prefix}max_epochs=1 or more (-1: no limit)"
            + (", or train=false to test the weights as they are" if prefix == "trainer." else "")
        )
    check_devices(trainer, prefix)


def check_devices(trainer: Mapping[str, Any], prefix: str) -> None:
    """`precision=auto` times one process; CPU processes fit the cores; a GPU run has the GPUs it asks for."""
    accelerator, precision = trainer.get("accelerator"), trainer.get("precision")
    devices: Any = trainer.get("devices")  # a number, a string, a list of device ids, or None
    strategy = trainer.get("strategy", "auto")
    strategy = str(strategy.get("_target_", strategy) if isinstance(strategy, Mapping) else strategy).rsplit(".", 1)[-1]
    if precision == "auto" and (devices not in (1, "1", None) or "ddp" in strategy.lower()):
        raise ConfigError(
            f"{prefix}precision=auto times one process, not {devices} device(s) (strategy {strategy}): "
            f"set {prefix}precision=32-true or {prefix}precision=bf16-mixed"
        )
    if accelerator == "cpu" and is_whole(devices) and devices > (cores := usable_cores()):
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


def check_joint(model: Mapping[str, Any], data: Mapping[str, Any]) -> None:
    """The model's and the data's settings together: inputs no longer than the positional table."""
    max_length, max_len = data.get("max_length"), model.get("max_len")
    if isinstance(max_length, int) and isinstance(max_len, int) and max_length > max_len:
        raise ConfigError(
            f"data.max_length={max_length} is longer than the positional table model.max_len={max_len}: "
            f"lower data.max_length or raise model.max_len (e.g. model.max_len={max_length})"
        )


RUN_RULES: dict[str, Rule] = {  # the run's own keys; `batch_size` is predict.py's
    "seed": (whole(0, null=True), "a whole number >= 0 (or null: no seeding)", 42),
    "tags": (
        lambda v: v is None or (isinstance(v, list) and all(isinstance(t, str | int | float) for t in v)),
        "a list of words",
        "[baseline,heads8]",
    ),
    "batch_size": (whole(1), "a whole number >= 1", 64),
}
TREE_RULE: Rule = (lambda v: v in ("changes", "full"), "changes (what this run changes) or full", "full")


def check_run(values: Mapping[str, Any]) -> None:
    """The run's own keys: `seed`, `tags`, `console.tree`, and predict.py's `batch_size` and `device`."""
    check_rules(values, RUN_RULES, prefix="")
    check_rules(values.get("console") or {}, {"tree": TREE_RULE}, prefix="console.")
    device = values.get("device")
    if device is None:
        return
    kind, _, index = str(device).partition(":")
    if kind not in ("cpu", "cuda", "mps") or (index and not index.isdigit()):
        raise ConfigError(f"device={device!r} is not a device: use cpu, cuda, cuda:1 (a GPU's number) or mps")
    if kind == "cuda":
        import torch  # only for a GPU

        if not torch.cuda.is_available():
            none = "this torch sees no CUDA GPU (a CPU build, or none)"
            raise ConfigError(f"device={device} but {none}: use device=cpu")
        if index and int(index) >= (visible := torch.cuda.device_count()):
            raise ConfigError(
                f"device={device} but {visible} GPU(s) are visible: use device=cuda:0 to cuda:{visible - 1}"
            )


def check_loggers(loggers: Mapping[str, Any]) -> None:
    """A logger whose package is not installed names the project's extra that brings it (named as the package)."""
    for name, entry in loggers.items():
        target = str(entry.get("_target_", "")) if isinstance(entry, Mapping) else ""
        package = {"MLFlowLogger": "mlflow", "WandbLogger": "wandb"}.get(target.rsplit(".", 1)[-1])
        if package is not None and importlib.util.find_spec(package) is None:
            raise ConfigError(
                f"logger={name} needs {package}, which is not installed: pip install -e '.[{package}]' "
                f"(or leave it out: logger.{name}=null)"
            )


FLAG: Rule = (lambda v: isinstance(v, bool), "true or false", "true")
# the callbacks' arguments no schema types: a word for a number fails here, not when the callback is built
CALLBACK_RULES: dict[str, dict[str, Rule]] = {
    "model_analysis": {
        "normalized": FLAG,
        "max_cost": (
            lambda v: v is None or (is_number(v) and v >= 0),
            "a number >= 0 (a share of the fit's time; null: always)",
            0.25,
        ),
    },
    "attention_maps": {
        "text_method": (
            lambda v: v is None or v in known_methods(),
            f"one of {', '.join(known_methods())} (null: none)",
            "decompx",
        ),
        "text_heads": (whole(0), "a whole number >= 0 (0: none)", 2),
        "num_examples": (whole(1), "a whole number >= 1", 4),
        "every_n_epochs": (whole(1), "a whole number >= 1", 2),
        "max_tokens": (whole(2), "a whole number >= 2", 24),
        **dict.fromkeys(("mean", "rollout", "text", "html", "background"), FLAG),
    },
}


def check_callbacks(callbacks: Mapping[str, Any]) -> None:
    """The callbacks' arguments that CALLBACK_RULES types, where that callback is on."""
    for name, rules in CALLBACK_RULES.items():
        if isinstance(entry := callbacks.get(name), Mapping):
            check_rules(entry, rules, prefix=f"callbacks.{name}.")


_DEFAULTS: list = [None, None]  # this run's Hydra config node, and the defaults composed for it


def default_config() -> Any:
    """The config this run's entry composes with no overrides (a DictConfig), composed once a run: the console's
    tree and HPARAMS' checked columns both compare the run against it. None outside a Hydra run, or where the
    defaults do not compose alone (a config only the run's overrides can compose, such as a search path)."""
    from hydra import compose
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    if not (GlobalHydra().is_initialized() and HydraConfig.initialized()):
        return None
    run = HydraConfig.get()  # one node per run or sweep job: a new run composes its own defaults
    if _DEFAULTS[0] is not run:
        try:
            composed = compose(config_name=run.job.config_name, overrides=[])
        except Exception:  # noqa: BLE001 - the defaults alone do not compose: callers fall back
            composed = None
        _DEFAULTS[:] = [run, composed]
    return _DEFAULTS[1]
