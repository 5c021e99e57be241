"""What TensorBoard's ATTENTION tab adds to a run's event files: the bytes of its pages (each example's page data at
each logged step, compressed) beside the whole files'.

    python benchmarks/tab_size.py outputs/train/runs/<run> [<run> ...]

Each record counts as written: the event plus its 16 bytes of framing (length and checksums).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
from tensorboard.compat.proto.event_pb2 import Event

from transformer_attention.tensorboard_plugin.summary import PLUGIN_NAME

FRAMING = 16  # bytes around each record: its length (8), the length's checksum (4), the data's checksum (4)


def tab_bytes(run: Path) -> tuple[int, int, int]:
    """(all the event files' bytes, the tab's pages' bytes, pages) under `run`."""
    total = tab = pages = 0
    for file in sorted(run.rglob("events.out.tfevents.*")):
        for raw in RawEventFileLoader(str(file)).Load():
            total += len(raw) + FRAMING
            values = Event.FromString(raw).summary.value
            if any(v.metadata.plugin_data.plugin_name == PLUGIN_NAME for v in values):
                tab, pages = tab + len(raw) + FRAMING, pages + 1
    return total, tab, pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (or any folder above event files)")
    for run in parser.parse_args().runs:
        total, tab, pages = tab_bytes(run)
        each = f", {tab / pages / 1024:.1f} KiB a page" if pages else ""
        print(f"{run}: event files {total / 1e6:.2f} MB, the ATTENTION tab's {pages} pages {tab / 1e6:.3f} MB{each}")


if __name__ == "__main__":
    main()
