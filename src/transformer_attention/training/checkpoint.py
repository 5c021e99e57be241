"""Checkpoints: every `.ckpt` a run takes read by one loader, with `torch.load(weights_only=True)` (no pickled
code runs: a train.py checkpoint is plain data), anything else a `CheckpointError` naming the path and the fix;
written atomically; `numbers_digest` tells whether two runs trained the same model, bit for bit."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import re
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from ..data.labels import label_names_fault
from ..data.tokenizer import risky_patterns
from ..errors import CheckpointError, printable
from ..files import atomic_write
from ..module import ClassifierModule
from .settings import ModelConfig

REQUIRED_HPARAMS = ("vocab_size", "num_classes", "label_names")
# what a classifier started from a pretrained encoder takes from it (and max_len, for learned positions)
ARCHITECTURE = ("d_model", "num_heads", "num_layers", "dim_feedforward", "norm_first", "activation", "positional")


def encoder_shape(hparams: dict[str, Any]) -> dict[str, Any]:
    """The `ARCHITECTURE` settings of a pretrained encoder's hyperparameters, and max_len for learned positions."""
    keys = (*ARCHITECTURE, "max_len") if hparams.get("positional") == "learned" else ARCHITECTURE
    return {k: hparams[k] for k in keys if k in hparams}


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The Lightning checkpoint dict at `path`, loaded with `weights_only=True` on the CPU."""
    p = Path(path).expanduser()
    if not p.exists():
        near = sorted(q.name for q in p.parent.glob("*.ckpt")) if p.parent.is_dir() else []
        beside = f" (checkpoints in {p.parent}: {near})" if near else ""
        raise CheckpointError(f"checkpoint {p} does not exist{beside}")
    if p.is_dir():
        found = sorted(str(q.relative_to(p)) for q in [*p.glob("*.ckpt"), *p.glob("checkpoints/*.ckpt")])
        raise CheckpointError(f"checkpoint {p} is a folder: pass a .ckpt file in it (found: {found or 'none'})")
    if not p.is_file():
        raise CheckpointError(f"checkpoint {p} is not a regular file (a FIFO, socket or device): pass a .ckpt file")
    with open(p, "rb") as f:
        head = f.read(4)
    if not (head.startswith(b"PK") or head[:1] == b"\x80"):  # torch.save's zip, or an older pickle
        raise CheckpointError(
            f"{p} ({p.stat().st_size} bytes) is not a checkpoint: a .ckpt is a zip archive written by torch.save, "
            f"this file starts with bytes {head.hex(' ')}; pass a .ckpt from a run's checkpoints/ folder"
        )
    if head.startswith(b"PK"):
        check_records(p)
    try:
        with warnings.catch_warnings():  # torch's pickle-protocol notes: the error below says it better
            warnings.simplefilter("ignore", UserWarning)
            ckpt = torch.load(p, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise CheckpointError(
            f"checkpoint {p} holds more than plain data ({_reason(err)}), so it was "
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
    return ckpt


def check_records(p: Path) -> None:
    """Each record of the zip at `p` read against its CRC-32 before torch reads any of it (torch checks none):
    bytes changed since torch.save wrote them (a bad copy, a failing disk) are a CheckpointError naming the file.
    Skip-gram vectors (pretrain.py's vectors.npz, also a zip) are named as such, with the command that fine-tunes
    from them."""
    try:
        with zipfile.ZipFile(p) as archive:
            if {"vectors.npy", "known.npy"} <= set(archive.namelist()):
                raise CheckpointError(word_vectors(p, archive))
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as err:
        if not zipfile.is_zipfile(p):
            return  # no zip directory (a truncated file): torch.load's error below names it
        bad = f"({_reason(err)})"
    if bad is not None:
        raise CheckpointError(
            f"checkpoint {p} is damaged: its record {printable(bad)} does not match the CRC-32 torch.save wrote "
            "for it (the file changed after it was written: a bad copy or a failing disk); copy it again from "
            "where it was written, or pick another .ckpt"
        )


def word_vectors(p: Path, archive: zipfile.ZipFile) -> str:
    """The line for skip-gram vectors given where a classifier is expected: what they are, and the train.py command
    that fine-tunes a classifier from them, its model settings checked as a run checks them."""
    with archive.open("vectors.npy") as f:  # the array's header alone: its shape (V, dim)
        major, _ = np.lib.format.read_magic(f)
        header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape = header(f)[0]
    dim, default_heads = int(shape[-1]), ModelConfig().num_heads
    heads = max(h for h in range(1, default_heads + 1) if dim % h == 0)  # the most, up to the default's
    return (
        f"{p} holds skip-gram word vectors ({shape[0]} x {dim}, pretrain.py pretrain.method=skipgram), not a "
        f"classifier: nothing in it classifies yet; fine-tune a classifier from them first: "
        f"{fine_tune_command(p, {'d_model': dim, 'num_heads': heads})}"
    )


def fine_tune_command(p: Path, model: dict[str, Any]) -> str:
    """`python train.py model.init_from=<p>` with the `model` settings a start from `p` needs (those that differ
    from the defaults), checked first as a run checks them: a command that works when pasted."""
    ModelConfig(init_from=str(p), **model)
    default = ModelConfig()
    given = [
        f"model.{k}={str(v).lower() if isinstance(v, bool) else v}"
        for k, v in model.items()
        if v != getattr(default, k)
    ]
    return " ".join(["python train.py", f"model.init_from={p}", *given])


NUMBERS = ("state_dict", "optimizer_states", "lr_schedulers")  # what a training computed, unlike callbacks' paths


def numbers_digest(path: str | Path) -> str:
    """SHA-256 of a checkpoint's `NUMBERS` (each tensor's name, dtype, shape and bytes): equal for two runs that
    trained the same model bit for bit, whose files differ (callbacks keep the run's paths)."""
    ckpt, digest = read_checkpoint(path), hashlib.sha256()

    def add(name: str, value: Any) -> None:
        if isinstance(value, dict):
            for key in sorted(value, key=str):
                add(f"{name}.{key}", value[key])
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                add(f"{name}.{i}", item)
        elif isinstance(value, torch.Tensor):
            tensor = value.detach().cpu().contiguous().reshape(-1)
            digest.update(f"{name} {tensor.dtype} {tuple(value.shape)}".encode())
            digest.update(tensor.view(torch.uint8).numpy().tobytes())
        else:
            digest.update(f"{name} {value!r}".encode())

    for key in NUMBERS:
        add(key, ckpt.get(key))
    return digest.hexdigest()


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """The checkpoint dict of a `train.py` run (`read_checkpoint`), checked to hold a classifier."""
    ckpt = read_checkpoint(path)
    p = Path(path).expanduser()
    if "mask_prob" in ckpt["hyper_parameters"]:
        raise CheckpointError(
            f"checkpoint {p} is a pretrained encoder (pretrain.py), not a classifier: nothing in it classifies yet; "
            f"fine-tune it first: {fine_tune_command(p, encoder_shape(ckpt['hyper_parameters']))}"
        )
    missing = [k for k in REQUIRED_HPARAMS if k not in ckpt["hyper_parameters"]] + (
        [] if ckpt.get("tokenizer") else ["tokenizer"]
    )
    if missing:
        raise CheckpointError(f"checkpoint {p} is not a transformer-attention classifier checkpoint: no {missing}")
    hparams = ckpt["hyper_parameters"]
    if hparams["label_names"] and (fault := label_names_fault(hparams["label_names"], hparams["num_classes"])):
        raise CheckpointError(
            f"checkpoint {p} cannot name its classes: {printable(fault)}; a classifier's checkpoint holds one "
            "distinct name per class (train.py writes them): pick another .ckpt, or retrain it (python train.py)"
        )
    return ckpt


def load_module(path: str | Path | None, map_location: str | torch.device = "cpu") -> ClassifierModule:
    """A ClassifierModule rebuilt from a checkpoint file alone (hyperparameters, weights, tokenizer), in eval mode."""
    if not path:
        raise CheckpointError("no checkpoint given: pass ckpt_path=<run>/checkpoints/<name>.ckpt")
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
    check_usable(module, path)
    return module.to(map_location).eval()


def check_usable(module: ClassifierModule, path: str | Path) -> None:
    """A CheckpointError for weights that are not finite (a diverged training) or a tokenizer pattern that can
    take exponential time, before any text is read."""
    bad = [name for name, t in module.state_dict().items() if t.is_floating_point() and not torch.isfinite(t).all()]
    if bad:
        raise CheckpointError(
            f"checkpoint {path} holds weights that are not finite numbers (NaN or inf: {bad[0]}"
            f"{f' and {len(bad) - 1} more' if len(bad) > 1 else ''}): the training diverged; use an earlier checkpoint "
            "of that run, or retrain it with a lower learning rate (e.g. model.optimizer.lr=0.0005)"
        )
    risky = risky_patterns(module.tokenizer_json) if module.tokenizer_json else []
    if risky:
        raise CheckpointError(
            f"checkpoint {path}'s tokenizer has a pattern that repeats a repetition, {printable(risky[0])!r}, which "
            "can take exponential time (or fail) on a text: retrain with this version's tokenizer (python train.py)"
        )


def _reason(err: BaseException) -> str:
    """The telling part of a loader's error: its last line's first sentence, never torch's hint to load with
    weights_only=False."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip() and "weights_only" not in line]
    return f"{type(err).__name__}: {lines[-1].split('. ')[0]}" if lines else type(err).__name__


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, atomic on a local disk (files.atomic_write): a full disk or a kill never
    leaves a truncated `.ckpt` under a real name, and a full disk is a DiskError naming the folder."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None) -> None:
        if "://" in str(path):  # remote storage: Lightning's writer and its fsspec transaction
            return super().save_checkpoint(checkpoint, path, storage_options=storage_options)
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        buffer = io.BytesIO()  # serialised first: torch's zip writer hides the file's OSError in a RuntimeError
        torch.save(checkpoint, buffer)
        atomic_write(path, buffer.getbuffer())


def expect_checkpoints(run_dir: str | Path) -> None:
    """No warning that the checkpoint folder of a run resumed in `run_dir` "exists and is not empty": that is what
    it is for (any other folder still warns)."""
    # the folder as given, and as ModelCheckpoint writes its dirpath (a realpath: through symlinks)
    folders = "|".join(re.escape(str(p).rstrip("/")) for p in {str(run_dir), os.path.realpath(run_dir)})
    warnings.filterwarnings("ignore", message=rf"Checkpoint directory ({folders})[/\\].* exists and is not empty")
