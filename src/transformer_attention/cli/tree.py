"""The config a run starts with, as a person reads it: on the console, what this run changes from the defaults (the
command line's overrides and an experiment's changes), one `key: value` line each that can be copied back as an
override; in the run folder, `config_tree.log`, the whole tree as plain YAML. `console.tree=full` prints the whole
tree too. Plain text, never wrapped or padded: a path stays on one line, whatever the terminal's width."""

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

ORDER = ("data", "model", "trainer", "callbacks", "logger", "paths")


def print_config_tree(
    cfg: DictConfig,
    save_to: str | Path | None = None,
    unused: Sequence[str] = (),
    show: bool = True,
    defaults: DictConfig | None = None,
) -> None:
    """Print `cfg` as `console.tree` says (changes: the keys whose value differs from `defaults`, the config the
    same entry composes with no overrides: `cfg` itself in a run given none, else composed here when not given;
    full: the whole tree), without the `unused` groups (say, `pretrain` in a run that does not pretrain); with
    `save_to`, write the whole tree there and name it. `show=False` only writes it (a sweep's jobs: the tree of
    each would fill the console)."""
    if save_to is not None:
        atomic_write(save_to, tree_text(cfg))
    if not show:
        return
    where = [f"config: all of it in {shown(save_to)}"] if save_to is not None else []
    mode = OmegaConf.select(cfg, "console.tree", default="changes")
    if mode == "full":
        base = None
    elif defaults is not None:
        base = defaults
    else:
        base = cfg if given_no_overrides() else default_config()
    if base is None:  # console.tree=full, or no Hydra to compose the defaults with: the whole tree
        print("\n".join([tree_text(cfg, unused), *where]))
        return
    lines = [f"  {key}: {value}" for key, value in changes(cfg, base) if key.lstrip("~").split(".")[0] not in unused]
    head = "what this run changes from the defaults" if lines else "the defaults"
    print("\n".join([f"config: {head} (console.tree=full prints all of it)", *lines, *where]))


def tree_text(cfg: DictConfig, unused: Sequence[str] = ()) -> str:
    """The whole config as YAML, groups first (in `ORDER`), then the run's own keys; values resolved, except a key
    that only points at another group (`settings: ${analysis}`), which is shown as that pointer: each setting once."""
    groups = [k for k in ORDER if k in cfg] + [k for k in cfg if k not in ORDER and OmegaConf.is_dict(cfg[k])]
    plain = _plain(cfg, OmegaConf.to_container(cfg, resolve=False))
    parts = [_yaml({group: plain[group]}) for group in groups if group not in unused]
    return "\n".join([*parts, _yaml({key: value for key, value in plain.items() if key not in groups})])


def changes(cfg: DictConfig, defaults: DictConfig) -> list[tuple[str, str]]:
    """(dotted key, value as an override writes it) for every leaf of `cfg` that `defaults` lacks or holds another
    value for, compared before interpolation (a run's folder is not a change), then `~key` for keys it removed."""
    mine, base = dict(_leaves(cfg)), dict(_leaves(defaults))
    out = [(key, _flow(_value(cfg, key))) for key, raw in mine.items() if key not in base or base[key] != raw]
    gone = [k for k in base if not _within(k, mine) and not any(m.startswith(f"{k}.") for m in mine)]
    return out + [(f"~{key}", "(removed)") for key in gone]


def _within(key: str, leaves: dict[str, Any]) -> bool:
    """Whether `key` or a node above it is one of `leaves` (a group set to null holds what it held)."""
    parts = key.split(".")
    return any(".".join(parts[:n]) in leaves for n in range(1, len(parts) + 1))


def _leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, raw value) of each leaf of a config node; a list, an empty node or an interpolation is a leaf."""
    plain = OmegaConf.to_container(node, resolve=False) if OmegaConf.is_config(node) else node
    container = cast("dict[str, Any]", plain)  # a DictConfig's values, or a dict of them: string keys
    for key, value in container.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _value(cfg: DictConfig, key: str) -> Any:
    try:
        value = OmegaConf.select(cfg, key, throw_on_resolution_failure=True)
    except OmegaConfBaseException:  # resolves only in a Hydra run
        value = OmegaConf.select(cfg, key, throw_on_resolution_failure=False)
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _flow(value: Any) -> str:
    """A value as an override writes it: null, true, [a, b], {k: v}."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    return str(value)


def _plain(node: Any, raw: Any) -> Any:
    """A config node as plain values (`raw`: the same, unresolved), resolved, except a pointer at a whole group, kept
    as written; a value that resolves only in a Hydra run is also shown as written."""
    if not OmegaConf.is_config(node):
        return node
    keys = list(node) if isinstance(node, DictConfig) else range(len(node))
    out: dict[Any, Any] | list[Any] = {} if isinstance(node, DictConfig) else []
    for key in keys:
        written = raw[key]
        try:
            value = node[key]
        except OmegaConfBaseException:
            value = written
        if isinstance(written, str) and "${" in written and OmegaConf.is_config(value):
            value = written  # each setting once: `settings: ${analysis}`, not the analysis group again
        value = _plain(value, written) if OmegaConf.is_config(value) else value
        if isinstance(out, dict):
            out[key] = value
        else:
            out.append(value)
    return out


class _Dumper(yaml.SafeDumper):
    """YAML of plain values; any other value a config may hold (an enum, a path) written as its text."""


_Dumper.add_multi_representer(object, lambda dumper, value: dumper.represent_str(str(value)))


def _yaml(values: dict) -> str:
    """Block YAML, keys in their order, never folded: a long path stays on its line."""
    return yaml.dump(values, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=float("inf"))
