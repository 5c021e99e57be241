"""What the entry points share: run folders, the config tree, and `run_task`, the one wrapper that
checks a config and turns the project's errors into one line. Light imports only (no torch), so
that a bad config value fails in about a second."""

from __future__ import annotations

import logging
import re
from importlib import import_module
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .config import check_config, register_schemas
from .console import quiet_console
from .errors import UserError
from .rundir import RunDirBusy, discard_unused, is_rank_zero, lock_run_dir

log = logging.getLogger(__name__)


def run_task(task: str, cfg: DictConfig) -> Any:
    """Check `cfg`, then run `transformer_attention.<task>.main(cfg)`. Bad input (the project's
    UserErrors, a config Hydra cannot instantiate) ends a single run with `<kind>: <message>` on
    stderr and no traceback; in a sweep it is raised, so the sweep records the job as failed.
    The run folder is locked while the task runs (rundir.py); a single run stopped before any work
    leaves no folder behind (a sweep's job keeps its folder: its log records the failure)."""
    run_dir = Path(HydraConfig.get().runtime.output_dir) if HydraConfig.initialized() else None
    try:
        check_config(cfg)  # before torch is imported: a bad value fails in a second
        if run_dir is not None and is_rank_zero():
            lock_run_dir(run_dir)
        quiet_console()  # each log line once, no tips (after the config check: it imports Lightning)
        return import_module(f"{__package__}.{task}").main(cfg)
    except (UserError, InstantiationException) as err:
        cause = err.__cause__ if isinstance(err.__cause__, UserError) else err  # a constructor's own error
        kind = cause.kind if isinstance(cause, UserError) else "config error"
        message = " ".join(str(cause).split())  # Hydra's messages span lines: one line
        if in_sweep():
            log.error("%s: %s", kind, message)
            raise
        if run_dir is not None and is_rank_zero():
            busy = isinstance(cause, RunDirBusy)  # another run's folder: only this run's config goes
            own = not busy and run_dir_of(cfg.get("ckpt_path")) != run_dir.resolve()  # not resumed in place
            discard_unused(run_dir, own=own, subdir=HydraConfig.get().output_subdir, check_work=not busy)
        raise SystemExit(f"{kind}: {message}") from None


def in_sweep() -> bool:
    """Whether this is a job of a multirun (grid, Optuna, any launcher), not a single run."""
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def run_dir_of(ckpt_path: str | Path | None) -> Path | None:
    """The run folder `<run>` of a checkpoint at `<run>/checkpoints/*.ckpt`, if it is a Hydra run folder."""
    if not ckpt_path:
        return None
    p = Path(str(ckpt_path)).expanduser().resolve()
    run = p.parent.parent
    if p.is_file() and p.parent.name == "checkpoints" and (run / ".hydra").is_dir():
        return run
    return None


def _resume_dir(ckpt_path: Any, default: str) -> str:
    run = run_dir_of(ckpt_path)
    return str(run) if run else default


def _resume_subdir(ckpt_path: Any, resumed: str, default: str) -> str:
    return resumed if run_dir_of(ckpt_path) else default


NAME_SKIPS = ("hydra", "hparams_search", "paths", "ckpt_path", "data.path", "data.data_files", "trainer.devices")


def job_name(num: Any, overrides: Any) -> str:
    """`${job_name:${hydra.job.num},${hydra.overrides.task}}`: a sweep job's folder (and so its TensorBoard run)
    named by its number and what it overrides, e.g. `1_model.num_heads=2,model.lr=0.001`. The number keeps
    names unique; paths, devices and the sweep's own settings are left out; at most 100 characters."""
    parts = [str(o) for o in overrides or [] if not str(o).lstrip("+~").startswith(NAME_SKIPS)]
    name = ",".join(re.sub(r"[^A-Za-z0-9_.,=+\-]+", "-", p) for p in parts)
    return f"{num}_{name}"[:100] if name else str(num)


def register_resolvers() -> None:
    """`${resume_dir:ckpt,default}` and `${resume_subdir:ckpt,resumed,default}` for `hydra.run` in train.yaml;
    `${job_name:num,overrides}` for `hydra.sweep.subdir`."""
    OmegaConf.register_new_resolver("resume_dir", _resume_dir, replace=True)
    OmegaConf.register_new_resolver("resume_subdir", _resume_subdir, replace=True)
    OmegaConf.register_new_resolver("job_name", job_name, replace=True)


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
    except OmegaConfBaseException:  # an interpolation that only resolves in a Hydra run
        return OmegaConf.to_yaml(node)


# on import: any code that composes conf/ (entry points, tests) has the resolvers and the model schema
register_resolvers()
register_schemas()
