"""Images and text to whichever of a run's loggers take them, each through its public API (TensorBoard, MLflow,
W&B; CSV is skipped), TensorBoard's tags after the curves (plotting/tags.py); `ImageWriter` renders and writes
them on the calling thread or on one of its own."""

from __future__ import annotations

import struct
import time
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
from lightning.pytorch.loggers import Logger, MLFlowLogger, TensorBoardLogger, WandbLogger
from lightning.pytorch.utilities import rank_zero_only
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.image.metadata import create_summary_metadata
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.writer import FileWriter

from ..plotting.tags import tensorboard_tag


def image_loggers(loggers: Sequence[Logger]) -> list[Logger]:
    """The loggers that `log_image` writes to."""
    return [lg for lg in loggers if isinstance(lg, TensorBoardLogger | MLFlowLogger | WandbLogger)]


def png_bytes(image: np.ndarray) -> bytes:
    """An (H, W, 3) uint8 image as PNG bytes, rows unfiltered, deflated at level 1: these flat images come out
    about as small as Pillow's, which spends most of its time choosing a filter for each row (1.7x slower)."""
    height, width, _ = image.shape
    scanlines = np.zeros((height, 1 + 3 * width), dtype=np.uint8)  # a filter byte (0: none), then the pixels
    scanlines[:, 1:] = image.reshape(height, 3 * width)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, RGB, deflate, no filter, no interlace
    data = zlib.compress(scanlines.tobytes(), 1)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data) + chunk(b"IEND", b"")


def add_tensorboard_image(writer: SummaryWriter, tag: str, image: np.ndarray, step: int, description: str = "") -> None:
    """An (H, W, 3) uint8 image with a description (shown under the card's title), which `add_image` cannot carry
    (and it resamples every image)."""
    height, width, channels = image.shape
    png = Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=png_bytes(image))
    metadata = create_summary_metadata(display_name=tag, description=description)
    write_summary(writer, Summary(value=[Summary.Value(tag=tag, image=png, metadata=metadata)]), step)


def write_summary(writer: SummaryWriter, summary: Summary, step: int) -> None:
    """`summary` at `step` in `writer`'s run; after the logger was closed (after fit), in a file of its own beside
    the run's."""
    if writer.file_writer is not None:
        writer.file_writer.add_summary(summary, global_step=step)
    else:
        late = FileWriter(writer.log_dir)
        late.add_summary(summary, global_step=step)
        late.close()


@rank_zero_only
def log_image(loggers: Sequence[Logger], tag: str, image: np.ndarray, step: int, description: str = "") -> None:
    """Log an `(H, W, 3)` uint8 image as `tag` at `step` to each logger that takes images."""
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"log_image takes an (H, W, 3) uint8 array, got {image.shape} {image.dtype}")
    for lg in loggers:
        if isinstance(lg, TensorBoardLogger):
            add_tensorboard_image(lg.experiment, tensorboard_tag(tag), image, step, description)
        elif isinstance(lg, MLFlowLogger):  # shown per step in the run's Artifacts > images (MLflow >= 2.12)
            lg.experiment.log_image(lg.run_id, image, key=tag, step=step)
        elif isinstance(lg, WandbLogger):
            lg.log_image(key=tag, images=[image], step=step)


@rank_zero_only
def log_text(loggers: Sequence[Logger], tag: str, text: str, step: int) -> None:
    """Log `text` (markdown for TensorBoard) as `tag` at `step` to each logger that takes text."""
    for lg in loggers:
        if isinstance(lg, TensorBoardLogger):
            lg.experiment.add_text(tensorboard_tag(tag), text, global_step=step)
        elif isinstance(lg, MLFlowLogger):  # an artifact per step: text/<tag>/step_<step>.txt
            lg.experiment.log_text(lg.run_id, text, artifact_file=f"text/{tag}/step_{step}.txt")
        elif isinstance(lg, WandbLogger):
            lg.log_text(key=tag, columns=["text"], data=[[text]], step=step)


class ImageWriter:
    """Renders images and logs them, on the calling thread or (`background`) on a thread of its own, where at most
    `max_pending` wait (then the caller waits: nothing is dropped). `seconds`: the time spent, on either thread."""

    def __init__(self, background: bool = False, max_pending: int = 64) -> None:
        self.background, self.max_pending = background, max_pending
        self.seconds = 0.0
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque[Future] = deque()

    def send(self, loggers: list[Logger], tag: str, step: int, description: str, render: Callable, *args: Any) -> None:
        """Log `render(*args)` (an (H, W, 3) uint8 image) as `tag` at `step`."""

        def job() -> float:
            start = time.perf_counter()
            log_image(loggers, tag, render(*args), step, description)
            return time.perf_counter() - start

        if not self.background:
            self.seconds += job()
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attention-maps")
        while len(self._pending) >= self.max_pending:
            self.seconds += self._pending.popleft().result()
        self._pending.append(self._pool.submit(job))

    def wait(self) -> None:
        """Block until every image handed to the writer thread is written (its errors are raised here)."""
        while self._pending:
            self.seconds += self._pending.popleft().result()

    def close(self) -> None:
        """Write what is pending, then stop the thread (a later `send` starts a new one)."""
        if self._pool is not None:
            try:
                self.wait()
            finally:
                self._pool.shutdown()
                self._pool = None
