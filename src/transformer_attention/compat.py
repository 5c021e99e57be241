"""Workarounds of a dependency's behaviour, each with its reason: the only module allowed to reach past a
public API (tests/test_public_api.py scans the rest). Standard library at import time: the entry points call
`quiet_console` before torch is imported."""

from __future__ import annotations

import csv
import logging
import warnings
from pathlib import Path

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


# ---- TensorBoard's event checksums ----------------------------------------------------------------
# Without TensorFlow, TensorBoard's writer checksums each record (masked CRC-32C) in pure Python, about 6 MB/s, on its
# writer thread and holding the GIL: the default toy run's 3 MB of images cost half a second of CPU there and held
# the training thread back by more (0.6 to 2 s a run). google-crc32c computes the same checksum in C.
def masked_crc32c(data: bytes) -> int:
    """TensorBoard's `masked_crc32c` (tensorboard/compat/tensorflow_stub/pywrap_tensorflow.py), in C."""
    from google_crc32c import value

    crc = value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def fast_event_checksums() -> None:
    """Every TensorBoard event file written from now on takes its checksums from `masked_crc32c`."""
    from tensorboard.summary.writer import record_writer

    record_writer.masked_crc32c = masked_crc32c
