"""A quiet console: each log line once, no vendor tips, no warnings the user cannot act on.

Lightning gives its `lightning` logger a console handler of its own (`INFO: ...`) and, imported before
Hydra sets up logging, `lightning.pytorch` and `lightning.fabric` too; Hydra's root handlers print the
same records again in its format (and write them to the run's log file). `quiet_console` removes
Lightning's console handlers and lets the records reach Hydra's handlers once, drops Lightning's
advertising tips, and hides one deprecation warning that Lightning's own code raises under torch >= 2.10
(nothing in this project can act on it).
"""

from __future__ import annotations

import logging
import warnings

LIGHTNING_LOGGERS = ("lightning", "lightning.pytorch", "lightning.fabric")
TIP_PREFIX = "\U0001f4a1 Tip:"  # "💡 Tip: For seamless cloud ..." (litlogger, litmodels)
RANK_ZERO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")
# raised by lightning/pytorch/utilities/_pytree.py itself
LIGHTNING_DEPRECATIONS = (r"`isinstance\(treespec, LeafSpec\)` is deprecated",)


class DropTips(logging.Filter):
    """Drops Lightning's tips that advertise other products."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(TIP_PREFIX)


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
