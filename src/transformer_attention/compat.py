"""Workarounds of a dependency's behaviour, each with its reason: the only module allowed to reach past a
public API (tests/test_public_api.py scans the rest). Standard library at import time: the entry points call
`quiet_console` before torch is imported."""

from __future__ import annotations

import csv
import logging
import os
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from pathlib import Path
from typing import Any


# ---- package faces that import nothing heavy ------------------------------------------------------
# torch takes about 3 s to import and Lightning about 9: a package whose names need them (model, data, analysis,
# pretraining) imports the module that holds a name on its first use, so that a config is checked, and refused,
# in about a second, by the torch-free modules beside them.
def lazy_face(package: str, names_by_module: Mapping[str, Sequence[str]]) -> tuple[Callable[[str], Any], list[str]]:
    """A package's `__getattr__` (PEP 562) that imports a name's module (`names_by_module`: module -> names) the
    first time the name is used, and the names it serves (for `__all__`)."""
    where = {name: module for module, names in names_by_module.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f".{where[name]}", package), name)

    return __getattr__, sorted(where)


# ---- Lightning's console --------------------------------------------------------------------------
# Lightning gives its `lightning` logger a console handler of its own (`INFO: ...`) and, imported before Hydra
# sets up logging, `lightning.pytorch` and `lightning.fabric` too; Hydra's root handlers print the same
# records again in its format (and write them to the run's log file). It also prints tips advertising other
# products and a note each time a module asks for `trainer.estimated_stepping_batches` (the warmup/cosine
# schedule does), and its own code raises a deprecation warning under torch >= 2.10 that no user can act on.
LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric")
TIP_PREFIX = "\U0001f4a1 Tip:"  # "💡 Tip: For seamless cloud ..." (litlogger, litmodels)
DROPPED = (TIP_PREFIX, "Loading `train_dataloader` to estimate number of stepping batches")
RANK_ZERO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")
# raised by lightning/pytorch/utilities/_pytree.py itself
LIGHTNING_DEPRECATIONS = (r"`isinstance\(treespec, LeafSpec\)` is deprecated",)


class DropTips(logging.Filter):
    """Drops Lightning's tips that advertise other products, and its note on estimating the stepping batches."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(DROPPED)


def quiet_console() -> None:
    """Each Lightning log line once, through the root (Hydra's) handlers; no tips; no warnings from
    Lightning's own calls. Idempotent. Call it after Hydra configured logging, before the Trainer."""
    import lightning.pytorch  # noqa: F401  (imported first: it adds the handlers removed below)

    if not logging.getLogger().handlers:
        return  # nothing would print the records: keep Lightning's own handlers (no Hydra, e.g. a notebook)
    for name in LIGHTNING_LOGGERS:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            if type(handler) is logging.StreamHandler:  # the console ones; a FileHandler is a subclass: kept
                logger.removeHandler(handler)
        logger.propagate = True
    for name in RANK_ZERO_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, DropTips) for f in logger.filters):
            logger.addFilter(DropTips())
    for message in LIGHTNING_DEPRECATIONS:
        warnings.filterwarnings("ignore", message=message)


# ---- progress bars and warnings of the project's own set-up --------------------------------------------
# `datasets` draws a progress bar for each split it generates from a file ("Generating train split"), which, where
# stderr is not a terminal (a log file, CI, a sweep's job), lands in the log as lines of bar characters. Lightning's
# ModelCheckpoint warns that its folder "exists and is not empty", with a site-packages path, when a run resumes in
# its own folder (ckpt_path=<run>/checkpoints/...), which is what that folder is for.
def quiet_datasets() -> None:
    """No `datasets` progress bars where stderr is not a terminal (a terminal keeps them: a big file takes a while)."""
    import sys

    import datasets

    if not sys.stderr.isatty():
        datasets.disable_progress_bars()


def expect_checkpoints(run_dir: str | Path) -> None:
    """Silence Lightning's warning that a checkpoint folder under `run_dir` is not empty (a run resumed in place)."""
    # the folder as given, and as ModelCheckpoint writes its dirpath (a realpath: through symlinks)
    folders = "|".join(re.escape(str(p).rstrip("/")) for p in {str(run_dir), os.path.realpath(run_dir)})
    warnings.filterwarnings("ignore", message=rf"Checkpoint directory ({folders})[/\\].* exists and is not empty")


# ---- Lightning's CSV writer -----------------------------------------------------------------------
def continue_csv_header(logger: object) -> None:
    """Make a CSVLogger's writer continue the header of the `metrics.csv` it appends to. Lightning's writer
    knows only the columns it wrote itself; in a process of its own (`ddp_spawn`: fit and test each spawn
    their ranks from the parent's pickled logger) it meets a file written by another process and rewrites
    it with too few columns (`ValueError: dict contains fields not in fieldnames`). Call it in the parent
    before each spawned stage."""
    path = Path(logger.experiment.metrics_file_path)
    if path.is_file():
        with path.open(newline="") as f:
            header = next(csv.reader(f), [])
        keys = logger.experiment.metrics_keys
        keys.extend(k for k in header if k not in keys)
        keys.sort()


# ---- TensorBoard's tag groups ---------------------------------------------------------------------
# TensorBoard's TIME SERIES tab (its default) groups tags by their first part, sorts the groups by name and opens
# the first two only: with this project's names those would be `attention` (the maps, too small to read in a
# card) and `test` (single numbers), with the loss and accuracy curves closed below. In TensorBoard alone,
# every group but the curves' is written with a leading "~", which sorts after every letter: the curves open
# first, the results and the pictures follow. HPARAMS shows the test metrics under their own names.
CURVES = ("train", "val")


def tensorboard_tag(tag: str) -> str:
    """The tag TensorBoard gets for `tag`: `train/...` and `val/...` as they are, any other `~tag`."""
    return tag if tag.split("/", 1)[0] in CURVES or tag.startswith("~") else f"~{tag}"


# ---- torch's OpenMP threads on a crowded core -----------------------------------------------------
# torch's OpenMP threads (GNU libgomp) spin at a barrier while they wait for each other. Where another process
# shares one of the cores, the thread on that core runs late and the others spin for it: a 3-epoch toy run took
# 155 s instead of 8.4 s with two busy processes on one of 2 cores, 8.0 s with OMP_WAIT_POLICY=PASSIVE (the
# waiting threads sleep). At idle it costs a few percent at most, within the noise (benchmarks/busy_cores.py).
def calm_threads() -> bool:
    """Make torch's OpenMP threads sleep while they wait (OMP_WAIT_POLICY=PASSIVE), unless the user chose
    threads or a policy themselves (OMP_NUM_THREADS, OMP_WAIT_POLICY set, even empty) or torch is already
    loaded (too late: libgomp reads it at start). True if it set the policy."""
    import sys

    if "OMP_NUM_THREADS" in os.environ or "OMP_WAIT_POLICY" in os.environ or "torch" in sys.modules:
        return False
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return True


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def free_cores() -> int:
    """The usable cores that no other process is running on now (at least 1): what the skip-gram's worker threads
    default to, so that they do not spin on a busy core either."""
    cores = usable_cores()
    try:
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])  # runnable tasks, this one too
    except (OSError, ValueError, IndexError):
        return cores
    return max(1, min(cores, cores - (running - 1)))
