"""`run(task, cfg)`: what every entry point does around its task, and the one place its errors become a line.

Fix torch's threads (threads.choose_threads: the usable cores, never the load), hold the run folder
(claimed before Hydra wrote into it: cli/owner.py), check the config (before torch is imported: a bad value fails
in about a second), start the run's log file, quiet the console, make DDP in a sweep spawn its ranks, print the
config tree, then run the task from `TASKS`. Bad input (the project's UserErrors, a config Hydra cannot
instantiate) ends a single run with `<kind>: <message>` on stderr and no traceback; a sweep's job returns it
(`JobFailed`, also in `<job>/failed.json`), so the sweep goes on and names it at its end. A single run stopped
before any work takes away what it made (no folder of its own is left behind) and writes no log line; a sweep's
job keeps its folder: its log records the failure. A run resumed in its own folder starts its log once its
checks have passed (the task calls `files.start_run_log` before its first work).
"""

from __future__ import annotations

import gc
import json
import logging
import sys
from collections.abc import Callable
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
from .overrides import release
from .rundir import RunDirBusy, claim_run_dir, give_up, is_rank_zero
from .tree import print_config_tree

log = logging.getLogger(__name__)

Main = Callable[[DictConfig], Any]


# ---- the tasks: each imported only once its config has passed the check -----------------------------
def _train() -> Main:
    from ..tasks.train import main

    return main


def _evaluate() -> Main:
    from ..tasks.evaluate import main

    return main


def _predict() -> Main:
    from ..tasks.predict import main

    return main


def _pretrain() -> Main:
    from ..tasks.pretrain import main

    return main


TASKS: dict[str, Callable[[], Main]] = {
    "train": _train,
    "evaluate": _evaluate,
    "predict": _predict,
    "pretrain": _pretrain,
}
SHOWS_TREE = ("train", "pretrain")  # the runs that train print their config tree and keep it in their folder
FAILED_FILE = "failed.json"  # a sweep's job that failed: its error kind and message, for the sweep's summary


def run(task: str, cfg: DictConfig) -> Any:
    """Check `cfg`, then run `TASKS[task]`'s `main(cfg)`, as this module's docstring says."""
    release()  # the config composed: a task's own errors are reported as Hydra reports them
    choose_threads()  # before torch is imported: OpenMP reads its wait policy (chosen from the load) when it starts
    first = "torch" not in sys.modules  # this process's first run: it imports torch, Lightning and the task
    if first:
        gc.disable()  # their million objects hold few cycles: collecting as they come cost ~0.8 s of CPU
    run_dir = Path(HydraConfig.get().runtime.output_dir) if HydraConfig.initialized() else None
    owned = run_dir if run_dir is not None and is_rank_zero() else None  # the folder this process answers for
    try:
        if owned is not None:
            claim_run_dir(owned)  # a single run's is held already; a sweep's job is claimed here
        if in_sweep():
            start_run_log()  # a job's own folder in a sweep's: its log records a failure too
        check_config(cfg, task)
        read_words(cfg)
        if run_dir is None or not resumed_in_place(cfg.get("ckpt_path"), run_dir):
            start_run_log()  # its own new folder
        quiet_console()  # each log line once, no tips (after the config check: it imports Lightning)
        use_threads()  # and logs to the run's file `torch threads: 2 (the usable cores; ...), OpenMP wait: ...`
        if in_sweep() and spawn_ddp(cfg.get("trainer")):
            log.info("DDP in a multirun: ranks are spawned (trainer.strategy=%s)", cfg.trainer.strategy)
        if task in SHOWS_TREE and run_dir is not None and is_rank_zero():
            unused = unused_groups(task, cfg)
            saved = tree_dir(cfg, run_dir) / "config_tree.log"
            print_config_tree(cfg, save_to=saved, unused=unused, show=not in_sweep())
            if in_sweep():
                log.info("config: %s", saved)
        main = TASKS[task]()
        if first:
            gc.freeze()  # the imports' objects stay out of every later collection's walk too
        gc.enable()
        return main(cfg)
    except (UserError, InstantiationException) as err:
        cause = err.__cause__ if isinstance(err.__cause__, UserError) else err  # a constructor's own error
        kind = cause.kind if isinstance(cause, UserError) else "config error"
        message = " ".join(str(cause).split())  # Hydra's messages span lines: one line
        if in_sweep():  # the job fails, the sweep goes on: its end names every failed job (cli/summary.py)
            log.error("%s: %s", kind, message)
            if run_dir is not None and not isinstance(cause, RunDirBusy):  # a busy folder is another run's
                atomic_write(run_dir / FAILED_FILE, json.dumps({"kind": kind, "message": message}) + "\n")
            return JobFailed(kind, message)
        drop_run_log()
        if owned is not None:
            give_up(owned)  # what this run made, nothing else (a folder another run holds: not claimed)
        raise SystemExit(f"{kind}: {message}") from None
    finally:
        gc.enable()


def unused_groups(task: str, cfg: DictConfig) -> tuple[str, ...]:
    """The groups of the config a task does not run, left out of the printed tree (the file keeps them): train.py's
    pretraining when it starts from none; pretrain.py's fine-tuning (its trainer, callbacks, loggers, analyses)."""
    if task == "pretrain":
        return ("trainer", "callbacks", "logger", "analysis")
    return ("pretrain",) if task == "train" and cfg.model.get("init_from") != "pretrain" else ()


def tree_dir(cfg: DictConfig, run_dir: Path) -> Path:
    """Where the config tree goes: the run folder, or beside `.hydra/resume_<time>/` for a run resumed in its own
    folder (which keeps the first run's files)."""
    if resumed_in_place(cfg.get("ckpt_path"), run_dir):
        subdir = HydraConfig.get().output_subdir
        return run_dir / subdir if subdir is not None else run_dir  # None: hydra.output_subdir=null, no .hydra
    return run_dir


def in_sweep() -> bool:
    """Whether this is a job of a multirun (grid, Optuna, any launcher), not a single run."""
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def spawn_ddp(trainer: DictConfig | None) -> bool:
    """Switch a DDP trainer config from Lightning's default launch (the other ranks re-run the command
    line) to spawned ranks; in place, True if changed. In a multirun, re-running the command line would
    start the whole sweep again in every rank > 0 and hang."""
    if trainer is None:
        return False
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
