"""Images and text to whichever of a run's loggers can take them, each through its public API:
TensorBoard (an image summary written to the SummaryWriter's `file_writer`; `add_text`), MLflow
(`MlflowClient.log_image` with a key and a step, `log_text` as an artifact), W&B (`WandbLogger.log_image`
/ `log_text`). Other loggers (CSV) are skipped. TensorBoard gets them after the curves (`plotting/tags.py`:
`attention/...` is `~attention/...` there). `ImageWriter` renders and writes them on the calling thread or on one
of its own."""

from __future__ import annotations

import struct
import threading
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


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_bytes(image: np.ndarray) -> bytes:
    """An (H, W, 3) uint8 image as PNG bytes: rows unfiltered, deflated by zlib at level 1. Three times faster
    than Pillow's encoder, which spends most of its time choosing a filter for each row; these images (flat
    colours and text) come out about as small without one. Any PNG reader decodes them (tests use Pillow)."""
    height, width, _ = image.shape
    scanlines = np.zeros((height, 1 + 3 * width), dtype=np.uint8)  # a filter byte (0: none), then the pixels
    scanlines[:, 1:] = image.reshape(height, 3 * width)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8 bits, RGB, deflate, no filter, no interlace
    return PNG_SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", zlib_fast(scanlines.tobytes())) + chunk(b"IEND", b"")


SPLIT_BYTES = 1 << 18  # data past 256 KiB is deflated in two halves side by side


def zlib_fast(data: bytes) -> bytes:
    """A zlib stream of `data` at level 1, as `zlib.compress(data, 1)`; past `SPLIT_BYTES`, its halves are deflated at
    once, one on a thread of its own (zlib releases the GIL), and joined as pigz joins its blocks: the first ends on
    a byte boundary (a sync flush) and the second, started afresh, refers to nothing before it. Twice as fast on
    an attention grid's 2 MB of rows where a core is free (the maps are drawn while training waits)."""
    if len(data) < SPLIT_BYTES:
        return zlib.compress(data, 1)
    view, half, first = memoryview(data), len(data) // 2, []
    worker = threading.Thread(target=lambda: first.append(_deflate(view[:half], last=False)), daemon=True)
    worker.start()
    second = _deflate(view[half:], last=True)
    worker.join()
    if not first:  # the thread failed (it cannot, short of memory): do it here, and say why if it fails again
        first.append(_deflate(view[:half], last=False))
    return b"\x78\x01" + first[0] + second + struct.pack(">I", zlib.adler32(data))  # level-1 header, checksum


def _deflate(data: memoryview, last: bool) -> bytes:
    """Raw deflate of `data` at level 1: ending the stream (`last`), or on a byte boundary for more blocks to follow."""
    stream = zlib.compressobj(1, zlib.DEFLATED, -15)  # -15: raw blocks, no header or checksum
    return stream.compress(data) + stream.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


def add_tensorboard_image(writer: SummaryWriter, tag: str, image: np.ndarray, step: int, description: str = "") -> None:
    """Write an (H, W, 3) uint8 image to a SummaryWriter with a description (TensorBoard shows it under the
    card's title). Encoded here (`png_bytes`) rather than by `add_image`, which resamples every image
    (LANCZOS, even at scale 1) and cannot carry a description."""
    height, width, channels = image.shape
    png = Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=png_bytes(image))
    metadata = create_summary_metadata(display_name=tag, description=description)
    summary = Summary(value=[Summary.Value(tag=tag, image=png, metadata=metadata)])
    if writer.file_writer is not None:
        writer.file_writer.add_summary(summary, global_step=step)
    else:  # the logger was closed (after fit): a file of its own beside the run's
        late = FileWriter(writer.log_dir)
        late.add_summary(summary, global_step=step)
        late.close()


@rank_zero_only
def log_image(loggers: Sequence[Logger], tag: str, image: np.ndarray, step: int, description: str = "") -> None:
    """Log an `(H, W, 3)` uint8 image as `tag` at `step` to each logger that takes images (TensorBoard also
    shows `description`, e.g. the text an attention map is of)."""
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


def _render_and_log(
    loggers: list[Logger], tag: str, step: int, description: str, render: Callable, args: tuple
) -> float:
    """`log_image(render(*args))`; returns the seconds it took."""
    start = time.perf_counter()
    log_image(loggers, tag, render(*args), step, description)
    return time.perf_counter() - start


class ImageWriter:
    """Renders images and logs them: on the calling thread, or (`background=True`) on a thread of its own,
    where rendering (numpy and Pillow, which release the GIL), encoding and writing overlap training. At most
    `max_pending` images wait for that thread; beyond that the caller waits: nothing is dropped. `seconds` is
    the time spent rendering and writing, on whichever thread."""

    def __init__(self, background: bool = False, max_pending: int = 64) -> None:
        self.background, self.max_pending = background, max_pending
        self.seconds = 0.0
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque[Future] = deque()

    def send(self, loggers: list[Logger], tag: str, step: int, description: str, render: Callable, *args: Any) -> None:
        """Log `render(*args)` (an (H, W, 3) uint8 image) as `tag` at `step`."""
        if not self.background:
            self.seconds += _render_and_log(loggers, tag, step, description, render, args)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attention-maps")
        while len(self._pending) >= self.max_pending:
            self.seconds += self._pending.popleft().result()
        self._pending.append(self._pool.submit(_render_and_log, loggers, tag, step, description, render, args))

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
