"""The config a run starts with: on the console, what it changes from the defaults as `key: value` lines that can
be given back as overrides (`console.tree=full`: all of it); in the run folder, `config_tree.log`, all of it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..files import atomic_write, shown
from ..training.defaults import given_no_overrides
from ..training.settings import default_config
from .console import say

ORDER = ("data", "model", "trainer", "callbacks", "logger", "paths")


def print_config_tree(
    cfg: DictConfig,
    save_to: str | Path | None = None,
    unused: Sequence[str] = (),
    show: bool = True,
    defaults: DictConfig | None = None,
) -> None:
    """Print `cfg` as `console.tree` says, without the `unused` groups: its changes from `defaults` (default: what
    its entry composes with no overrides) or the whole tree; with `save_to`, write the whole tree there and name it
    (`show=False`: only write it, as a sweep's jobs do)."""
    if save_to is not None:
        atomic_write(save_to, tree_text(cfg))
    if not show:
        return
    where = [f"config: all of it in {shown(save_to)}"] if save_to is not None else []
    full = OmegaConf.select(cfg, "console.tree", default="changes") == "full"
    if defaults is None and not full:
        defaults = cfg if given_no_overrides() else default_config()
    if full or defaults is None:  # or no Hydra to compose the defaults with: the whole tree
        lines = [tree_text(cfg, unused)]
    else:
        lines = [f"  {k}: {v}" for k, v in changes(cfg, defaults) if k.lstrip("~").split(".")[0] not in unused]
        head = "what this run changes from the defaults" if lines else "the defaults"
        lines.insert(0, f"config: {head} (console.tree=full prints all of it)")
    say("\n".join([*lines, *where]))


def tree_text(cfg: DictConfig, unused: Sequence[str] = ()) -> str:
    """The whole config as YAML, groups first (in `ORDER`), then the run's own keys; never folded."""
    groups = [k for k in ORDER if k in cfg] + [k for k in cfg if k not in ORDER and OmegaConf.is_dict(cfg[k])]
    values = plain(cfg)
    parts = [{group: values[group]} for group in groups if group not in unused]
    parts.append({key: value for key, value in values.items() if key not in groups})
    return "\n".join(yaml.safe_dump(p, sort_keys=False, allow_unicode=True, width=float("inf")) for p in parts)


def changes(cfg: DictConfig, defaults: DictConfig) -> list[tuple[str, str]]:
    """(dotted key, value as an override writes it) of each leaf of `cfg` that `defaults` lacks or holds another
    value for, compared before interpolation (a run's folder is not a change); then `~key` for keys it removed."""
    mine, base, shown = dict(leaves(cfg)), dict(leaves(defaults)), dict(leaves(plain(cfg)))
    out = [(key, as_override(shown[key])) for key, raw in mine.items() if key not in base or base[key] != raw]
    gone = [k for k in base if not any(f"{k}.".startswith(f"{m}.") or m.startswith(f"{k}.") for m in mine)]
    return out + [(f"~{key}", "(removed)") for key in gone]


def leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, raw value) of each leaf of a config node: a list, an empty node or an interpolation too."""
    plain = OmegaConf.to_container(node, resolve=False) if OmegaConf.is_config(node) else node
    for key, value in cast("dict[str, Any]", plain).items():  # a DictConfig's: string keys
        if isinstance(value, dict) and value:
            yield from leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def as_override(value: Any) -> str:
    """A value as an override writes it: null, true, [a, b], {k: v}."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return "[" + ", ".join(as_override(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {as_override(v)}" for k, v in value.items()) + "}"
    return str(value)


def plain(node: Any, raw: Any = None) -> Any:
    """A config node as plain values, resolved, but as written (`raw`) where it points at a group (`settings:
    ${analysis}`: each setting once) or resolves only in a Hydra run; an enum or a path as its text."""
    if not OmegaConf.is_config(node):
        return node if isinstance(node, str | int | float | bool | type(None)) else str(node)
    raw = OmegaConf.to_container(node, resolve=False) if raw is None else raw
    keys = list(node) if isinstance(node, DictConfig) else range(len(node))
    values = []
    for key in keys:
        try:
            value = node[key]
        except OmegaConfBaseException:
            value = raw[key]
        pointer = isinstance(raw[key], str) and "${" in raw[key] and OmegaConf.is_config(value)  # kept as written
        values.append(plain(raw[key] if pointer else value, raw[key]))
    return dict(zip(keys, values, strict=True)) if isinstance(node, DictConfig) else values
