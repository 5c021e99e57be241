"""Checkpoints: safe loading with clear errors, resuming a run in its own folder, saving on Ctrl-C / SIGTERM.

A `.ckpt` written by `train.py` is a Lightning checkpoint of plain data (tensors, numbers, strings,
lists, dicts), so it loads with `torch.load(weights_only=True)`: no pickled code runs. Anything
else (a missing file, a truncated download, a foreign checkpoint) is a `CheckpointError` naming
the path and the fix, which the entry points print without a traceback.
"""

from __future__ import annotations

import errno
import io
import logging
import os
import pickle
import shlex
import shutil
import signal
import threading
import uuid
import warnings
import zipfile
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import OmegaConf

from .errors import CheckpointError, DiskError
from .module import ClassifierModule
from .runs import run_dir_of

log = logging.getLogger(__name__)

REQUIRED_HPARAMS = ("vocab_size", "num_classes", "label_names")


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint dict of a `train.py` run, loaded with `weights_only=True` on the CPU."""
    p = Path(path).expanduser()
    if not p.exists():
        raise CheckpointError(f"checkpoint {p} does not exist{_nearby(p)}")
    if p.is_dir():
        found = sorted(q.name for q in p.glob("*.ckpt")) or sorted(
            str(q.relative_to(p)) for q in p.glob("checkpoints/*.ckpt")
        )
        raise CheckpointError(f"checkpoint {p} is a folder: pass a .ckpt file in it (found: {found or 'none'})")
    _check_format(p)
    try:
        with warnings.catch_warnings():  # torch's pickle-protocol notes: the error below says it better
            warnings.simplefilter("ignore", UserWarning)
            ckpt = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise CheckpointError(
            f"checkpoint {p} holds more than plain data ({_reason(err, 'WeightsUnpickler error:')}), so it was "
            "not loaded: weights_only=True runs no pickled code. It was not written by train.py"
        ) from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile) as err:
        raise CheckpointError(
            f"checkpoint {p} ({p.stat().st_size} bytes) cannot be read: it is truncated or not a PyTorch "
            f"checkpoint ({_reason(err)}). Copy it again or pick another .ckpt"
        ) from None
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt or "hyper_parameters" not in ckpt:
        keys = sorted(ckpt)[:8] if isinstance(ckpt, dict) else type(ckpt).__name__
        raise CheckpointError(
            f"checkpoint {p} is not a train.py checkpoint (expected a Lightning checkpoint with "
            f"'state_dict' and 'hyper_parameters', found {keys})"
        )
    missing = [k for k in REQUIRED_HPARAMS if k not in ckpt["hyper_parameters"]] + (
        [] if ckpt.get("tokenizer") else ["tokenizer"]
    )
    if missing:
        raise CheckpointError(f"checkpoint {p} is not a transformer-attention classifier checkpoint: no {missing}")
    return ckpt


def load_module(path: str | Path, map_location: str | torch.device = "cpu") -> ClassifierModule:
    """A ClassifierModule rebuilt from a checkpoint file alone (hyperparameters, weights, tokenizer), in eval mode."""
    ckpt = load_checkpoint(path)
    try:
        module = ClassifierModule(**ckpt["hyper_parameters"])
        module.on_load_checkpoint(ckpt)
        module.load_state_dict(ckpt["state_dict"])
    except (TypeError, RuntimeError, ValueError) as err:
        reason = " ".join(str(err).split())[:300]
        raise CheckpointError(
            f"checkpoint {path} comes from another version of transformer-attention ({reason}): "
            "retrain it with this version, or load it with the version that wrote it"
        ) from None
    return module.to(map_location).eval()


def check_resume(ckpt: dict[str, Any], model_cfg: Any, path: str | Path) -> None:
    """Resuming needs the model the checkpoint was trained with: name every `model.*` key that differs."""
    hparams = ckpt["hyper_parameters"]
    diff = [
        f"model.{k}={model_cfg[k]!r} (checkpoint: {hparams[k]!r})"
        for k in model_cfg
        if k in hparams and not k.startswith("_") and model_cfg[k] != hparams[k]
    ]
    if diff:
        raise CheckpointError(
            f"cannot resume from {path}: the config differs from the run it continues: {', '.join(diff)}; "
            f"pass that run's overrides again ({run_overrides_hint(path)})"
        )


def _check_format(p: Path) -> None:
    """A PyTorch checkpoint is a zip archive (torch.save's format since 1.6) or, older, a pickle:
    anything else is not a checkpoint at all, whatever torch.load would make of it."""
    with open(p, "rb") as f:
        head = f.read(4)
    if not head:
        raise CheckpointError(f"checkpoint {p} is empty (0 bytes): not a checkpoint; pick another .ckpt")
    if head.startswith(b"PK") or head[0] == 0x80:  # zip (perhaps truncated: torch.load says how) or pickle
        return
    raise CheckpointError(
        f"{p} ({p.stat().st_size} bytes) is not a checkpoint: a .ckpt is a zip archive written by torch.save, "
        f"this file starts with bytes {head.hex(' ')}; pass a .ckpt from a run's checkpoints/ folder"
    )


def _reason(err: BaseException, marker: str = "") -> str:
    """The telling part of a loader's error: the line after `marker`, or the first sentence."""
    message = str(err).split(marker, 1)[1] if marker and marker in str(err) else str(err)
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    text = lines[0].split(". ")[0] if lines else ""
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _nearby(p: Path) -> str:
    """A hint listing the checkpoints next to a path that does not exist."""
    folder = p.parent if p.parent.is_dir() else None
    found = sorted(q.name for q in folder.glob("*.ckpt")) if folder else []
    return f" (checkpoints in {folder}: {found})" if found else ""


# ---- writing checkpoints ----------------------------------------------------------------------
class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, made atomic on a local disk: the checkpoint goes to a temporary file
    in the target's own folder, is synced, then renamed over the target (os.replace), so a full disk or a
    kill never leaves a truncated `.ckpt` under a real name. (Lightning's own writer stages the file in
    the system's temporary folder and copies it over when that is another file system.) A full disk ends
    the run with a DiskError naming the folder and its free space."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        if "://" in str(path):  # remote storage: Lightning's writer and its fsspec transaction
            return super().save_checkpoint(checkpoint, path, storage_options=storage_options)
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()  # serialised first: torch's zip writer hides the file's OSError in a RuntimeError
        torch.save(checkpoint, buffer)
        tmp = target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")  # hidden, same folder
        try:
            with open(tmp, "xb") as f:  # the umask's permissions, as Lightning's own file
                f.write(buffer.getbuffer())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException as err:
            tmp.unlink(missing_ok=True)
            if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskError(disk_full_message(target, needed=buffer.tell())) from None
            raise


def disk_full_message(target: Path, needed: int) -> str:
    """What to say when `target` (`needed` bytes) could not be written for lack of space: the folder and
    its free space."""
    usage = shutil.disk_usage(target.parent)
    mib = 1024 * 1024
    return (
        f"no space left to write {target.name} ({needed / mib:.2f} MiB) in {target.parent}: "
        f"{usage.free / mib:.2f} MiB free of {usage.total / mib:.1f} MiB; every .ckpt already there is complete. "
        f"Free space there, or run with paths.log_dir=<a folder on a disk with space>"
    )


# ---- resuming in the run's own folder -------------------------------------------------------
def resumed_in_place(ckpt_path: str | Path | None, output_dir: str | Path) -> bool:
    """Whether this run resumes `ckpt_path` inside the run folder that wrote it (train.yaml's hydra.run.dir)."""
    run = run_dir_of(ckpt_path)
    return run is not None and run == Path(output_dir).resolve()


def run_overrides_hint(ckpt_path: str | Path) -> str:
    """The overrides the checkpoint's run was started with, as recorded in `<run>/.hydra/overrides.yaml`."""
    run = run_dir_of(ckpt_path)
    overrides = run / ".hydra" / "overrides.yaml" if run else None
    if not overrides or not overrides.is_file():
        return "no recorded overrides found next to the checkpoint"
    args = [o for o in OmegaConf.load(overrides) if not str(o).startswith("ckpt_path=")]
    return f"{overrides}: {' '.join(shlex.quote(str(a)) for a in args) or 'none'}"


def resume_command(ckpt_path: str | Path) -> str:
    """The command line that resumes this Hydra run from `ckpt_path` (same overrides, new ckpt_path)."""
    from hydra.core.hydra_config import HydraConfig

    overrides: list[str] = []
    if HydraConfig.initialized():
        overrides = [o for o in HydraConfig.get().overrides.task if not o.startswith("ckpt_path=")]
    args = [*overrides, f"ckpt_path={ckpt_path}"]
    return "python train.py " + " ".join(shlex.quote(a) for a in args)


# ---- saving on Ctrl-C / SIGTERM ----------------------------------------------------------------
class SaveOnInterrupt(Callback):
    """On Ctrl-C or SIGTERM during fit, save `last.ckpt` beside the other checkpoints and say how to resume.

    Both stop where Lightning stops for SIGTERM: after a training batch is stepped and logged (or
    after a validation batch; that validation is not redone on resume). The first Ctrl-C only asks
    for that stop (a second one stops at once), so the checkpoint holds one consistent step and the
    resumed run continues the global step and the TensorBoard curves without a gap or a repeat.
    Other exceptions leave `last.ckpt` as it was. (Lightning's OnExceptionCheckpoint saves on every
    exception and deletes its file when the run ends; a resume point wants neither.)
    """

    def __init__(self) -> None:
        self._ctrl_c = False
        self._previous_handler: Any = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._ctrl_c = False
        if threading.current_thread() is threading.main_thread():  # signal handlers live in the main thread
            self._previous_handler = signal.signal(signal.SIGINT, self._request_stop)

    def _request_stop(self, signum: int, frame: Any) -> None:
        lightning_stops = callable(signal.getsignal(signal.SIGTERM))  # Lightning's SIGTERM handler is installed
        if self._ctrl_c or not lightning_stops:
            raise KeyboardInterrupt
        self._ctrl_c = True
        signal.raise_signal(signal.SIGTERM)  # Lightning's own graceful stop, at the end of this step
        log.warning("Ctrl-C: stopping after this training batch (press Ctrl-C again to stop at once)")

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._restore_handler()

    def _restore_handler(self) -> None:
        if self._previous_handler is not None:
            signal.signal(signal.SIGINT, self._previous_handler)
            self._previous_handler = None

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._restore_handler()
        interrupted = isinstance(exception, (KeyboardInterrupt, SIGTERMException))
        if not interrupted or trainer.state.fn != "fit" or trainer.sanity_checking or trainer.fast_dev_run:
            return
        callback = trainer.checkpoint_callback
        dirpath = getattr(callback, "dirpath", None) or str(Path(trainer.default_root_dir) / "checkpoints")
        path = Path(dirpath) / "last.ckpt"
        trainer.save_checkpoint(path, weights_only=False)  # the full state; Lightning writes it atomically
        ctrl_c = self._ctrl_c or isinstance(exception, KeyboardInterrupt)
        if isinstance(exception, SIGTERMException):
            exception.code = 128 + (signal.SIGINT if ctrl_c else signal.SIGTERM)  # the shell's exit status
        log.warning(
            "%s: stopped at epoch %d, global step %d; saved %s\nresume with:\n  %s",
            "Ctrl-C" if ctrl_c else "SIGTERM",
            trainer.current_epoch,
            trainer.global_step,
            path,
            resume_command(path),
        )
