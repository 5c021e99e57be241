"""The rules that belong to no group's settings, each failure a ConfigError that names the key, the bad value and
the fix: those that join groups (the data's length and the model's positions; the keys pretrain.py does not run),
the run's own keys (seed, tags), predict.py's settings, the loggers' extras. Standard library at import time: the
config is checked before torch is imported (a GPU device imports it)."""

from __future__ import annotations

import importlib.util

from ..analysis.settings import known_methods
from ..checks import is_number, is_whole
from ..errors import ConfigError


def check_joint(model: dict, data: dict) -> None:
    """The rules that join the model's and the data's settings: inputs no longer than the positional table."""
    max_length, max_len = data.get("max_length"), model.get("max_len")
    if isinstance(max_length, int) and isinstance(max_len, int) and max_length > max_len:
        raise ConfigError(
            f"data.max_length={max_length} is longer than the positional table model.max_len={max_len}: "
            f"lower data.max_length or raise model.max_len (e.g. model.max_len={max_length})"
        )


RUN_GROUPS = ("trainer", "callbacks", "logger")  # the groups that run a fine-tuning; pretrain.py's are pretrain.*


def check_task_keys(task: str | None, overrides: list[str]) -> None:
    """pretrain.py runs only the pretraining of train.py's config: a command-line override of the fine-tuning's
    trainer, callbacks or loggers would change nothing, so it is refused with the key that does."""
    if task != "pretrain":
        return
    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        group = key.split(".", 1)[0]
        if group not in RUN_GROUPS:
            continue
        fix = f"pretrain.{key}={value}" if "." in key else f"{group}@pretrain.{group}={value}"
        raise ConfigError(
            f"{override} sets the fine-tuning's {group}, which pretrain.py does not run: the pretraining's is "
            f"pretrain.{group}: e.g. {fix}"
        )


DEVICE = ("cpu", "cuda", "mps")
TREE_MODES = ("changes", "full")  # console.tree: what the console shows of the config (cli/tree.py)


def check_run(values: dict) -> None:
    """The run's own keys: `seed`, `tags`, and predict.py's `batch_size`, `max_length` and `device`."""
    seed = values.get("seed")
    if seed is not None and not is_whole(seed, 0):
        raise ConfigError(f"seed={seed!r} must be a whole number >= 0 (or null: no seeding): e.g. seed=42")
    tags = values.get("tags")
    if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str | int | float) for t in tags)):
        raise ConfigError(f"tags={tags!r} must be a list of words: e.g. tags=[baseline,heads8]")
    console = values.get("console")
    tree = console.get("tree") if isinstance(console, dict) else None
    if tree is not None and tree not in TREE_MODES:
        raise ConfigError(f"console.tree={tree!r} must be changes (what this run changes) or full: console.tree=full")
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


# the callbacks' arguments no schema types (a `_target_` node takes what its class does): (is it allowed, what it
# must be, an example); an `abc` where a number belongs fails here, not as a TypeError when the callback is built
CALLBACK_RULES = {
    "model_analysis.normalized": (lambda v: isinstance(v, bool), "true or false", "true"),
    "model_analysis.max_cost": (
        lambda v: v is None or (is_number(v) and v >= 0),
        "a number >= 0 (a share of the fit's time; null: always)",
        0.25,
    ),
    "attention_maps.text_method": (
        lambda v: v is None or v in known_methods(),
        f"one of {', '.join(known_methods())} (null: none)",
        "decompx",
    ),
    "attention_maps.text_heads": (lambda v: is_whole(v, 0), "a whole number >= 0 (0: none)", 2),
    "attention_maps.num_examples": (lambda v: is_whole(v, 1), "a whole number >= 1", 4),
    "attention_maps.every_n_epochs": (lambda v: is_whole(v, 1), "a whole number >= 1", 2),
    "attention_maps.max_tokens": (lambda v: is_whole(v, 2), "a whole number >= 2", 24),
    **{
        f"attention_maps.{key}": (lambda v: isinstance(v, bool), "true or false", "true")
        for key in ("mean", "rollout", "text", "html", "background")
    },
}


def check_callbacks(callbacks: dict) -> None:
    """The callbacks' arguments that CALLBACK_RULES types, where that callback is on."""
    for path, (ok, allowed, example) in CALLBACK_RULES.items():
        name, key = path.split(".")
        entry = callbacks.get(name)
        if isinstance(entry, dict) and key in entry and not ok(entry[key]):
            raise ConfigError(f"callbacks.{path}={entry[key]!r} must be {allowed}: e.g. callbacks.{path}={example}")
