"""The resolved config as a rich tree: printed when a run starts and kept in its folder as `config_tree.log`."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

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
        Path(save_to).parent.mkdir(parents=True, exist_ok=True)
        Path(save_to).write_text(console.export_text())


def _yaml(node: DictConfig) -> str:
    try:
        return OmegaConf.to_yaml(node, resolve=True)
    except OmegaConfBaseException:  # an interpolation that only resolves in a Hydra run
        return OmegaConf.to_yaml(node)
