"""Every `_target_` a user can change, tried before any data is read, so that what a library refuses is one line
naming the key: the optimiser and schedule built on a dummy parameter, the Trainer's, callbacks' and loggers'
arguments bound to their signatures (as torchtune's config validation does), nested targets included."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from typing import Any

import torch
from hydra.utils import get_object, instantiate

from ..checks import closest
from ..errors import ConfigError
from ..module import build_optimizer, build_schedule

HYDRA_KEYS = ("_target_", "_partial_", "_convert_", "_recursive_", "_args_")


def try_optimization(optimizer: Mapping[str, Any] | None, scheduler: Mapping[str, Any] | None, prefix: str) -> None:
    """Build the optimiser and schedule (`prefix`: `model.` or `pretrain.`) of a one-weight module, as a fit would."""
    for key, node in (("optimizer", optimizer), ("scheduler", scheduler)):
        if node:
            try_signature(node, f"{prefix}{key}.")
    try:
        made = build_optimizer(torch.nn.Linear(1, 1), instantiate(optimizer))
    except Exception as err:  # whatever the optimiser refuses: named, without a traceback
        raise ConfigError(_refusal(err, optimizer or {}, f"{prefix}optimizer.")) from None
    try:
        build_schedule(made, instantiate(scheduler), total_steps=100)
    except Exception as err:
        raise ConfigError(_refusal(err, scheduler or {}, f"{prefix}scheduler.")) from None


Group = Mapping[str, Any] | None  # a config group's node, plain or as Hydra composed it


def try_run_groups(trainer: Group, callbacks: Group, logger: Group, prefix: str) -> None:
    """A run's trainer, callbacks and loggers (`prefix`: "" for a task's own, "pretrain." for its pretraining's)."""
    try_signature(trainer or {}, f"{prefix}trainer.")
    try_group(callbacks, f"{prefix}callbacks.")
    try_group(logger, f"{prefix}logger.")


def try_group(group: Mapping[str, Any] | None, prefix: str) -> None:
    """Bind every entry of a group (`callbacks.`, `logger.`) to its target's signature."""
    for name, entry in (group or {}).items():
        if isinstance(entry, Mapping) and "_target_" in entry:
            try_signature(entry, f"{prefix}{name}.")


def try_signature(node: Mapping[str, Any], prefix: str) -> None:
    """Bind `node`'s arguments to its `_target_`'s signature, then its nested targets': a ConfigError for a target
    that does not exist, an argument it does not take or one it lacks."""
    if "_target_" not in node:
        return
    target = node["_target_"]
    try:
        made = get_object(str(target))
    except Exception as err:
        raise ConfigError(f"{prefix}_target_={target}: no such class or function ({type(err).__name__})") from None
    arguments = {k: v for k, v in node.items() if k not in HYDRA_KEYS}
    try:
        signature = inspect.signature(made)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to bind
        return
    bind = signature.bind_partial if node.get("_partial_") else signature.bind
    try:
        bind(*node.get("_args_", ()), **arguments)
    except TypeError as err:
        accepted = [p for p in signature.parameters if p not in ("self", "args", "kwargs")]
        unknown = next((k for k in arguments if k not in signature.parameters), None)
        if unknown is not None:
            near = closest(unknown, accepted)
            hint = f"did you mean {prefix}{near}?" if near else f"it takes {', '.join(accepted) or 'none'}"
            raise ConfigError(f"{prefix}{unknown} is not an argument of {target}: {hint}") from None
        raise ConfigError(f"{prefix[:-1]} ({target}): {err}") from None
    for key, value in arguments.items():
        if isinstance(value, Mapping) and "_target_" in value:
            try_signature(value, f"{prefix}{key}.")


def _refusal(err: Exception, node: Mapping[str, Any], prefix: str) -> str:
    """`<key>=<value>: <target> refuses it (<its message>)`, the key found in the message where it names one."""
    message = " ".join(str(err).split()) or type(err).__name__
    words = set(re.findall(r"[A-Za-z_]+", message.lower()))
    named = [k for k in node if k not in HYDRA_KEYS and (k.lower() in words or k.lower().rstrip("s") in words)]
    target = node.get("_target_", "the default")
    if named:
        key = named[0]
        return f"{prefix}{key}={node[key]!r}: {target} refuses it ({message})"
    return f"{prefix[:-1]} ({target}) refused its settings: {message}"
