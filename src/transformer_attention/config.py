"""Checks on a composed config, run before any data is loaded or model built, and the config tree print.

Each failure names the key, the bad value and the fix, and raises ConfigError. Two layers:
explicit rules for the values this project defines (sizes, fractions, choices, divisibility), then
a generic pass over every `_target_` node: keys its class does not take and values of the wrong
type (against the class's type hints), so a typo fails in a second, not after the data is tokenized.
"""

from __future__ import annotations

import difflib
import inspect
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from .runs import in_sweep

# The model's choices, spelled out so that checking a config imports no torch (a bad value then
# fails in about a second); tests/test_config.py checks they equal the model's own constants.
ATTENTION_IMPLS = ("math", "sdpa", "chunked")
POOLINGS = ("cls", "mean")
POSITIONALS = ("sinusoidal", "learned")
ACTIVATIONS = ("relu", "gelu")

HYDRA_KEYS = {"_target_", "_partial_", "_convert_", "_recursive_", "_args_"}
_UNSET = object()


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and the fix."""


def validate_config(cfg: DictConfig) -> None:
    """Raise ConfigError on the first impossible value in `cfg` (a whole or partial config)."""
    check_values(cfg)
    for key, node in _target_nodes(cfg):
        _check_target_node(key, node)


def check_values_or_exit(cfg: DictConfig) -> None:
    """The entry points' first step, before torch is imported: a bad value ends a single run with one
    line on stderr; in a sweep it raises, so the sweep records the job as failed and goes on."""
    try:
        check_values(cfg)
    except ConfigError as err:
        if in_sweep():
            raise
        raise SystemExit(f"config error: {err}") from None


def check_values(cfg: DictConfig) -> None:
    """The explicit rules: sizes, fractions, choices, divisibility (no imports of the classes)."""
    model, data = cfg.get("model"), cfg.get("data")
    if model is not None:
        _check_model(model)
    if data is not None:
        _check_data(data)
    if model is not None and data is not None:
        max_length, max_len = _get(data, "max_length"), _get(model, "max_len")
        if isinstance(max_length, int) and isinstance(max_len, int) and max_length > max_len:
            raise ConfigError(
                f"data.max_length={max_length} is longer than the positional table model.max_len={max_len}: "
                f"lower data.max_length or raise model.max_len (e.g. model.max_len={max_length})"
            )
    if cfg.get("trainer") is not None:
        _check_trainer(cfg.trainer)
    tags = _get(cfg, "tags")
    if tags is not _UNSET and tags is not None:
        if not isinstance(tags, list | tuple) or not all(isinstance(t, str | int | float) for t in tags):
            raise ConfigError(f"tags={tags!r} must be a list of words: e.g. tags=[baseline,heads8]")


# ---- explicit rules -------------------------------------------------------------------------
def _check_model(model: DictConfig) -> None:
    for key in ("d_model", "num_heads", "num_layers", "dim_feedforward", "max_len"):
        _positive_int(model, "model", key)
    d, h = _get(model, "d_model"), _get(model, "num_heads")
    if isinstance(d, int) and isinstance(h, int) and d % h != 0:
        raise ConfigError(
            f"model.d_model={d} is not divisible by model.num_heads={h}: pick model.num_heads among "
            f"the divisors of model.d_model (e.g. model.num_heads={_divisor_near(d, h)})"
        )
    _fraction(model, "model", "dropout")
    _fraction(model, "model", "attention_dropout", nullable=True)
    _fraction(model, "model", "label_smoothing")
    _choice(model, "model", "pooling", POOLINGS)
    _choice(model, "model", "attention_impl", ATTENTION_IMPLS)
    _choice(model, "model", "positional", POSITIONALS)
    _choice(model, "model", "activation", ACTIVATIONS)
    optimizer = model.get("optimizer")
    if optimizer is not None:
        lr = _get(optimizer, "lr")
        if lr is not _UNSET and (not _is_number(lr) or lr <= 0):
            raise ConfigError(f"model.optimizer.lr={lr!r} must be a positive number: e.g. model.optimizer.lr=0.001")
    scheduler = model.get("scheduler")
    if scheduler is not None:
        _fraction(scheduler, "model.scheduler", "warmup_fraction")
        _fraction(scheduler, "model.scheduler", "min_lr_ratio", high=1.0, closed=True)


def _check_data(data: DictConfig) -> None:
    for key in ("batch_size", "vocab_size", "toy_size"):
        _positive_int(data, "data", key)
    _positive_int(data, "data", "eval_batch_size", nullable=True)
    max_length = _get(data, "max_length")
    if max_length is not _UNSET and (not _is_int(max_length) or max_length < 2):
        raise ConfigError(
            f"data.max_length={max_length!r} must be a whole number >= 2 (the [CLS] token and one word): "
            "e.g. data.max_length=128"
        )
    num_workers = _get(data, "num_workers")
    if num_workers is not _UNSET and (not _is_int(num_workers) or num_workers < 0):
        raise ConfigError(f"data.num_workers={num_workers!r} must be 0 (load in the main process) or more")
    val_fraction = _get(data, "val_fraction")
    if val_fraction is not _UNSET and (not _is_number(val_fraction) or not 0 < val_fraction < 1):
        raise ConfigError(f"data.val_fraction={val_fraction!r} must be in (0, 1): e.g. data.val_fraction=0.1")


def _check_trainer(trainer: DictConfig) -> None:
    accelerator = _get(trainer, "accelerator")
    if accelerator in ("gpu", "cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(
                f"trainer.accelerator={accelerator} but no CUDA GPU is visible here: "
                "use trainer=cpu (or trainer=ddp_cpu for 2 processes on CPU)"
            )
        devices = _get(trainer, "devices")
        if _is_int(devices) and devices > torch.cuda.device_count():
            raise ConfigError(
                f"trainer.devices={devices} but only {torch.cuda.device_count()} GPU(s) are visible: "
                f"use trainer.devices={torch.cuda.device_count()} (or trainer.devices=auto)"
            )
    num_nodes = _get(trainer, "num_nodes")
    if num_nodes is not _UNSET and (not _is_int(num_nodes) or num_nodes < 1):
        raise ConfigError(f"trainer.num_nodes={num_nodes!r} must be a whole number >= 1")


def _positive_int(node: DictConfig, prefix: str, key: str, nullable: bool = False) -> None:
    value = _get(node, key)
    if value is _UNSET or (nullable and value is None):
        return
    if not _is_int(value) or value <= 0:
        raise ConfigError(f"{prefix}.{key}={value!r} must be a whole number >= 1: e.g. {prefix}.{key}=2")


def _fraction(
    node: DictConfig, prefix: str, key: str, nullable: bool = False, high: float = 1.0, closed: bool = False
) -> None:
    value = _get(node, key)
    if value is _UNSET or (nullable and value is None):
        return
    if not _is_number(value) or not (0 <= value <= high if closed else 0 <= value < high):
        interval = f"[0, {high:g}]" if closed else f"[0, {high:g})"
        raise ConfigError(f"{prefix}.{key}={value!r} must be a number in {interval}: e.g. {prefix}.{key}=0.1")


def _choice(node: DictConfig, prefix: str, key: str, choices: tuple[str, ...]) -> None:
    value = _get(node, key)
    if value is _UNSET or value in choices:
        return
    near = difflib.get_close_matches(str(value), choices, n=1)
    fix = f"did you mean {prefix}.{key}={near[0]}?" if near else f"use {prefix}.{key}={choices[0]}"
    raise ConfigError(f"{prefix}.{key}={value!r} is not one of {', '.join(choices)}: {fix}")


def _divisor_near(d: int, h: int) -> int:
    divisors = [k for k in range(1, d + 1) if d % k == 0]
    return min(divisors, key=lambda k: (abs(k - h), k))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _get(node: DictConfig, key: str) -> Any:
    """The resolved plain value of `node.key`; _UNSET when absent or not resolvable yet (e.g. `${hydra:...}`
    outside a Hydra run)."""
    if key not in node:
        return _UNSET
    try:
        value = node[key]
    except Exception:  # an interpolation that only resolves at run time
        return _UNSET
    if isinstance(value, DictConfig | ListConfig):
        try:
            return OmegaConf.to_container(value, resolve=True)
        except Exception:
            return _UNSET
    return value


# ---- generic: keys and types against the `_target_`'s signature -----------------------------
def _target_nodes(node: Any, prefix: str = "") -> Iterable[tuple[str, DictConfig]]:
    """Every dict node with a `_target_`, with its dotted key, outermost first."""
    if isinstance(node, DictConfig):
        if "_target_" in node:
            yield prefix, node
        for key in node.keys():
            if key == "hydra" and not prefix:
                continue
            try:
                child = node._get_node(key)
            except Exception:
                continue
            if isinstance(child, DictConfig | ListConfig):
                yield from _target_nodes(node[key], f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, ListConfig):
        for i, child in enumerate(node):
            yield from _target_nodes(child, f"{prefix}[{i}]")


def _check_target_node(key: str, node: DictConfig) -> None:
    from hydra._internal.utils import _locate  # hydra.utils.get_object also logs the error

    target = node._target_
    try:
        obj = _locate(target)
    except Exception as err:
        hint = "check the spelling" if "No module named" in str(err) or "has no attribute" in str(err) else "see above"
        raise ConfigError(f"{key}._target_={target!r} cannot be imported ({err}): {hint}") from None
    fn = obj.__init__ if inspect.isclass(obj) else obj
    try:
        params = inspect.signature(obj).parameters
        hints = typing.get_type_hints(fn)
    except (TypeError, ValueError, NameError):  # builtins, C extensions, unresolvable annotations
        return
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    name = getattr(obj, "__qualname__", target)
    for k in node.keys():
        if k in HYDRA_KEYS:
            continue
        if k not in params:
            if takes_any:
                continue
            near = difflib.get_close_matches(str(k), [p for p in params if p not in ("self", "args", "kwargs")], n=1)
            fix = f"did you mean {key}.{near[0]}?" if near else f"remove it (the parameters are: {', '.join(params)})"
            raise ConfigError(f"{key}.{k} is not a parameter of {name}: {fix}")
        child = node._get_node(k)
        if isinstance(child, DictConfig) and "_target_" in child:
            continue  # instantiated on its own; checked as its own node
        value = _get(node, k)
        if value is _UNSET or k not in hints:
            continue
        if _matches(value, hints[k]) is False:
            near = difflib.get_close_matches(str(value), [str(a) for a in _literals(hints[k])], n=1)
            fix = f": did you mean {key}.{k}={near[0]}?" if near else ""
            raise ConfigError(
                f"{key}.{k}={value!r} is not accepted by {name}: expected {_type_name(hints[k])}, "
                f"got {type(value).__name__}{fix}"
            )


def _matches(value: Any, hint: Any) -> bool | None:
    """Whether a plain config value fits a type hint; None when the hint is beyond this simple check."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        results = [_matches(value, arg) for arg in typing.get_args(hint)]
        return True if any(r is True for r in results) else (None if None in results else False)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return _is_int(value)
    if hint is float:
        return _is_number(value)
    if hint is str or hint is Path:
        return isinstance(value, str)
    if hint in (list, tuple) or origin in (list, tuple):
        return isinstance(value, list | tuple)
    if hint is dict or origin is dict:
        return isinstance(value, dict)
    if inspect.isclass(hint) and hint.__module__ in ("builtins", "datetime"):
        return isinstance(value, hint)
    if inspect.isclass(hint):
        return False if value is None or isinstance(value, bool | int | float | str) else None
    return None


def _literals(hint: Any) -> list[Any]:
    """Every allowed literal value in a hint (through unions)."""
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return list(typing.get_args(hint))
    if origin in (typing.Union, types.UnionType):
        return [v for arg in typing.get_args(hint) for v in _literals(arg)]
    return []


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(hint))
    if typing.get_origin(hint) is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(hint))
    return "None" if hint is type(None) else getattr(hint, "__name__", str(hint))


# ---- adjustments ------------------------------------------------------------------------------
def spawn_ddp(trainer: DictConfig) -> bool:
    """Switch a DDP trainer config from Lightning's default launch (the other ranks re-run the command
    line) to spawned ranks; in place, True if changed. In a multirun, re-running the command line would
    start the whole sweep again in every rank > 0 and hang."""
    strategy = trainer.get("strategy")
    with open_dict(trainer):
        if strategy == "ddp":
            trainer.strategy = "ddp_spawn"
            return True
        if (
            isinstance(strategy, DictConfig)
            and str(strategy.get("_target_", "")).endswith("DDPStrategy")
            and strategy.get("start_method", "popen") == "popen"
        ):
            strategy.start_method = "spawn"
            return True
    return False


# ---- the config tree ------------------------------------------------------------------------
ORDER = ("data", "model", "trainer", "callbacks", "logger", "paths")


def print_config_tree(cfg: DictConfig, save_to: str | Path | None = None) -> None:
    """Print the resolved config as a rich tree (groups first, then the run's own values); with
    `save_to`, also write it there as plain text."""
    from rich.console import Console
    from rich.syntax import Syntax
    from rich.tree import Tree

    tree = Tree("config", guide_style="dim")
    groups = [k for k in ORDER if k in cfg] + [k for k in cfg if k not in ORDER and OmegaConf.is_dict(cfg[k])]
    for group in groups:
        tree.add(group).add(Syntax(_yaml(cfg[group]), "yaml", word_wrap=True))
    rest = OmegaConf.masked_copy(cfg, [k for k in cfg if k not in groups])
    tree.add("run").add(Syntax(_yaml(rest), "yaml", word_wrap=True))
    console = Console(record=save_to is not None)
    console.print(tree)
    if save_to is not None:
        Path(save_to).write_text(console.export_text())


def _yaml(node: DictConfig) -> str:
    try:
        return OmegaConf.to_yaml(node, resolve=True)
    except Exception:  # an interpolation that only resolves in a Hydra run
        return OmegaConf.to_yaml(node)
