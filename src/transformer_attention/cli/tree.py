"""The resolved config as a rich tree: printed when a run starts and kept in its folder as `config_tree.log`."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..files import atomic_write

ORDER = ("data", "model", "trainer", "callbacks", "logger", "paths")


def print_config_tree(
    cfg: DictConfig, save_to: str | Path | None = None, unused: Sequence[str] = (), show: bool = True
) -> None:
    """Print the resolved config as a rich tree (groups first, then the run's own values), without the `unused`
    groups (say, `pretrain` in a run that does not pretrain); with `save_to`, also write the whole tree there
    as plain text. `show=False` only writes it (a sweep's jobs: the tree of each would fill the console)."""
    from rich.console import Console

    if save_to is not None:
        console = Console(record=True, file=io.StringIO(), width=100)
        console.print(_tree(cfg, ()))
        atomic_write(save_to, console.export_text())
    if show:
        Console().print(_tree(cfg, unused))


def _tree(cfg: DictConfig, unused: Sequence[str]) -> object:
    from rich.syntax import Syntax
    from rich.tree import Tree

    tree = Tree("config", guide_style="dim")
    groups = [k for k in ORDER if k in cfg] + [k for k in cfg if k not in ORDER and OmegaConf.is_dict(cfg[k])]
    for group in groups:
        if group not in unused:
            tree.add(group).add(Syntax(_yaml(cfg[group]), "yaml", word_wrap=True))
    rest = OmegaConf.masked_copy(cfg, [k for k in cfg if k not in groups])
    tree.add("run").add(Syntax(_yaml(rest), "yaml", word_wrap=True))
    return tree


def _yaml(node: DictConfig) -> str:
    try:
        return OmegaConf.to_yaml(node, resolve=True)
    except OmegaConfBaseException:  # an interpolation that only resolves in a Hydra run
        return OmegaConf.to_yaml(node)
