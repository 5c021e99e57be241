"""Workarounds of dependencies' bugs, the only module allowed past a public API: each with its upstream issue, a
guard that turns it off on a release newer than the newest one checked, and a strict xfail in tests/test_compat.py
that passes once upstream fixes it. Standard library at import time; each workaround imports the dependency it
mends when called (`quiet_console` imports Lightning: the entry points call it after the config check)."""

from __future__ import annotations

import csv
import functools
import logging
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

LIGHTNING_CHECKED = "2.6.6"  # the newest Lightning release checked to have each Lightning bug below


@functools.cache
def affected(package: str, newest_checked: str) -> bool:
    """Whether the installed `package` is `newest_checked` or older: a release known to have the bug."""
    from packaging.version import Version

    try:
        return Version(version(package)) <= Version(newest_checked)
    except PackageNotFoundError:
        return False


# ---- Lightning's console --------------------------------------------------------------------------
# `lightning/__init__.py` gives the `lightning` logger a console handler of its own (`INFO: ...`) whatever the root
# logger has, so Hydra's root handlers print every record a second time: the duplicates of Lightning-AI/pytorch-
# lightning#4621, fixed for `lightning.pytorch` and `lightning.fabric` by #6275 (they add theirs only where the
# root logger has none: Lightning imported before Hydra set up logging) but not for the package that holds both.
LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric")
# Lightning prints tips advertising its other products, with no way to turn them off (Lightning-AI/pytorch-
# lightning#21294, open).
TIP_PREFIX = "\U0001f4a1 Tip:"  # "💡 Tip: For seamless cloud ..." (litlogger, litmodels)
RANK_ZERO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")
# Lightning's own pytree code builds `LeafSpec()`, which torch >= 2.10 deprecates: a FutureWarning at each batch
# that no user can act on (Lightning-AI/pytorch-lightning#21326).
LEAFSPEC_WARNING = r"`isinstance\(treespec, LeafSpec\)` is deprecated"
LEAFSPEC_MODULE = r"lightning\.pytorch\.utilities\._pytree"


class DropTips(logging.Filter):
    """Drops Lightning's tips that advertise other products."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(TIP_PREFIX)


def quiet_console() -> None:
    """Each Lightning log line once, through the root (Hydra's) handlers; no tips; no deprecation warning raised by
    Lightning's own code. Idempotent. Call it after Hydra configured logging, before the Trainer."""
    if not affected("lightning", LIGHTNING_CHECKED):
        return
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
    warnings.filterwarnings("ignore", message=LEAFSPEC_WARNING, category=FutureWarning, module=LEAFSPEC_MODULE)


# ---- Lightning's CSV writer -----------------------------------------------------------------------
# Lightning's CSV writer appends to `metrics.csv` knowing only the columns it wrote itself: one that meets a file
# written by another writer, as a `ddp_spawn` stage does (fit and test each spawn their ranks from the parent's
# pickled logger), rewrites it with too few columns and fails (`ValueError: dict contains fields not in
# fieldnames`, Lightning-AI/pytorch-lightning#19432; appending came with #18567).
def continue_csv_header(logger: Any) -> None:
    """Make a CSVLogger's writer continue the header of the `metrics.csv` it appends to. Call it in the parent
    before each spawned stage."""
    if not affected("lightning", LIGHTNING_CHECKED):
        return
    path = Path(logger.experiment.metrics_file_path)
    if path.is_file():
        with path.open(newline="") as f:
            header = next(csv.reader(f), [])
        keys = logger.experiment.metrics_keys
        keys.extend(k for k in header if k not in keys)
        keys.sort()
