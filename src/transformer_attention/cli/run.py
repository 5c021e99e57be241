"""`run(task, cfg)`: what every entry point does around its task (threads, run folder, config check before torch,
log, config tree), and the one place its errors become a line, `<kind>: <message>`; a sweep's job returns it
instead (`JobFailed`, also in `<job>/failed.json`), so the sweep goes on and names it at its end."""

from __future__ import annotations

import gc
import importlib
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.errors import InstantiationException
from hydra.types import RunMode
from omegaconf import DictConfig, open_dict

from ..compat import quiet_console
from ..errors import JobFailed, UserError
from ..files import atomic_write, drop_run_log, resumed_in_place, start_run_log
from ..threads import choose_threads, use_threads
from .config import check_config, read_words
from .entry import release
from .rundir import RunDirBusy, claim_run_dir, give_up, is_rank_zero
from .tree import print_config_tree

log = logging.getLogger(__name__)

TASKS = {task: f"transformer_attention.tasks.{task}" for task in ("train", "evaluate", "predict", "pretrain")}
FAILED_FILE = "failed.json"  # a sweep's job that failed: its error kind and message, for the sweep's summary


def run(task: str, cfg: DictConfig) -> Any:
    """Check `cfg`, then run the `main(cfg)` of `TASKS[task]`'s module, as this module's docstring says."""
    release()  # the config composed: a task's own errors are reported as Hydra reports them
    choose_threads()  # before torch is imported: OpenMP reads its wait policy when it starts
    run_dir = Path(HydraConfig.get().runtime.output_dir) if HydraConfig.initialized() else None
    owned = run_dir if run_dir is not None and is_rank_zero() else None  # the folder this process answers for
    sweep = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN  # a job (grid, Optuna, ...)
    try:
        with uncollected_imports():
            if owned is not None:
                claim_run_dir(owned)  # a single run's is held already; a sweep's job is claimed here
            if sweep:
                start_run_log()  # a job's own folder in a sweep's: its log records a failure too
            check_config(cfg, task)
            read_words(cfg)
            if run_dir is None or not resumed_in_place(cfg.get("ckpt_path"), run_dir):
                start_run_log()  # its own new folder
            quiet_console()  # each log line once, no tips (after the config check: it imports Lightning)
            use_threads()  # and logs the count to the run's file
            if sweep and spawn_ddp(cfg.get("trainer")):
                log.info("DDP in a multirun: ranks are spawned (trainer.strategy=%s)", cfg.trainer.strategy)
            if task in ("train", "pretrain") and owned is not None:  # the runs that train keep their tree
                show_tree(task, cfg, owned, sweep)
            main = importlib.import_module(TASKS[task]).main
        return main(cfg)
    except (UserError, InstantiationException) as err:
        cause = err.__cause__ if isinstance(err.__cause__, UserError) else err  # a constructor's own error
        kind = cause.kind if isinstance(cause, UserError) else "config error"
        message = " ".join(str(cause).split())  # Hydra's messages span lines: one line
        if sweep:  # the job fails, the sweep goes on: its end names every failed job (summary.py)
            log.error("%s: %s", kind, message)
            if run_dir is not None and not isinstance(cause, RunDirBusy):  # a busy folder is another run's
                atomic_write(run_dir / FAILED_FILE, json.dumps({"kind": kind, "message": message}) + "\n")
            return JobFailed(kind, message)
        drop_run_log()
        if owned is not None:
            give_up(owned)  # what this run made, nothing else (a folder another run holds: not claimed)
        raise SystemExit(f"{kind}: {message}") from None


@contextmanager
def uncollected_imports() -> Iterator[None]:
    """The collector off while a process's first run imports torch, Lightning and its task (a million objects, few
    cycles: ~0.8 s of CPU collected as they come), then what they made frozen out of later collections' walks."""
    first = "torch" not in sys.modules
    if first:
        gc.disable()
    try:
        yield
        if first:
            gc.freeze()
    finally:
        gc.enable()


def show_tree(task: str, cfg: DictConfig, run_dir: Path, sweep: bool) -> None:
    """Print the config tree, less the groups the task does not run, and keep it in the run folder (in `.hydra/`
    for a run resumed there); a sweep's job only names the file."""
    subdir = HydraConfig.get().output_subdir  # None: hydra.output_subdir=null, no .hydra
    resumed = resumed_in_place(cfg.get("ckpt_path"), run_dir) and subdir is not None
    saved = (run_dir / str(subdir) if resumed else run_dir) / "config_tree.log"
    unused: tuple[str, ...] = ("trainer", "callbacks", "logger", "analysis") if task == "pretrain" else ()
    if task == "train" and cfg.model.get("init_from") != "pretrain":
        unused = ("pretrain",)
    print_config_tree(cfg, save_to=saved, unused=unused, show=not sweep)
    if sweep:
        log.info("config: %s", saved)


def spawn_ddp(trainer: DictConfig | None) -> bool:
    """Switch a DDP trainer config to spawned ranks, in place (True if changed): in a multirun, Lightning's default
    launch (the other ranks run the command line again) would start the sweep again in every rank and hang."""
    strategy = trainer.get("strategy") if trainer is not None else None
    if strategy == "ddp" and trainer is not None:
        with open_dict(trainer):
            trainer.strategy = "ddp_spawn"
        return True
    if isinstance(strategy, DictConfig) and str(strategy.get("_target_", "")).endswith("DDPStrategy"):
        if strategy.get("start_method", "popen") == "popen":
            with open_dict(strategy):
                strategy.start_method = "spawn"
            return True
    return False
