"""A run in a terminal reads as a person sees it: a toy run captured through a pseudo-terminal and replayed on a
small screen model shows each progress bar once, and the lines that say where the pages and the analysis are."""

from __future__ import annotations

import fcntl
import logging
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from conftest import ROOT, entry_env

from transformer_attention.cli.console import ConsoleHandler

COLUMNS = 120
CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r|\n|[^\x1b\r\n]+|\x1b")


def screen(output: str, width: int = COLUMNS) -> list[str]:
    """The lines a terminal of `width` columns shows after `output`, scrolled back included: text, carriage return,
    new line, cursor up (ESC[nA), column (ESC[nG) and line erasing (ESC[K, ESC[2K); colours and the rest ignored."""
    lines, row, col = [""], 0, 0
    for part in CONTROL.findall(output):
        if part == "\r":
            col = 0
        elif part == "\n":
            row, col = row + 1, 0
            lines += [""] * (row + 1 - len(lines))
        elif part.startswith("\x1b["):
            command, arg = part[-1], part[2:-1]
            if command == "A":
                row = max(0, row - int(arg or 1))
            elif command == "G":
                col = int(arg or 1) - 1
            elif command == "K":
                lines[row] = "" if arg == "2" else lines[row][:col] if arg in ("", "0") else lines[row]
        elif not part.startswith("\x1b"):
            for char in part:
                if col >= width:  # the terminal wraps
                    row, col = row + 1, 0
                    lines += [""] * (row + 1 - len(lines))
                line = lines[row].ljust(col)
                lines[row], col = line[:col] + char + line[col + 1 :], col + 1
    return [line.rstrip() for line in lines]


def in_terminal(*overrides: str, timeout: float = 300) -> str:
    """`python train.py overrides...` with stdout and stderr a pseudo-terminal of `COLUMNS` columns: all it wrote."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, COLUMNS, 0, 0))  # rows, columns: as a window has
    os.set_blocking(main, False)
    env = dict(entry_env(), TERM="xterm-256color", COLUMNS=str(COLUMNS), LINES="40")
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *overrides], cwd=ROOT, env=env,
                            stdin=child, stdout=child, stderr=child)  # fmt: skip
    os.close(child)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = os.read(main, 65536)
        except BlockingIOError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
            continue
        except OSError:  # the child closed its side
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    os.close(main)
    out = b"".join(chunks).decode("utf-8", errors="replace")
    assert proc.returncode == 0, out[-3000:]
    return out


def test_screen_model_redraws_in_place():
    assert screen("a\nbar 1\r\x1b[2Kbar 2\nc") == ["a", "bar 2", "c"]
    assert screen("x\ny\n\x1b[2A\x1b[2Kz") == ["z", "y", ""]
    assert screen("abcdef", width=4) == ["abcd", "ef"]


def test_a_run_in_a_terminal_shows_each_bar_once_and_the_lines_naming_its_pages(tmp_path):
    """The default toy run, 2 epochs, its analysis always run (its bars show from 20 passes on), in a folder long
    enough that its paths do not fit the terminal wherever the test runs (alone, under xdist, ...)."""
    log_dir = tmp_path / ("a_folder_deep_enough_" * 3) / "outputs"
    out = in_terminal("trainer.max_epochs=2", "callbacks.model_analysis.max_cost=null", f"paths.log_dir={log_dir}")
    lines = screen(out)
    shown = "\n".join(lines)
    bars = {name: [line for line in lines if line.startswith(name)] for name in
            ("Epoch ", "Testing ", "head importance", "faithfulness:")}  # fmt: skip
    assert {name: len(found) for name, found in bars.items()} == dict.fromkeys(bars, 1), shown
    assert bars["Epoch "][0].startswith("Epoch 2/2") and "51/51" in bars["Epoch "][0]  # the last epoch, finished
    assert "100%" in bars["head importance"][0] and "100%" in bars["faithfulness:"][0]  # drawn in place, finished
    order = [
        next(i for i, line in enumerate(lines) if text in line)
        for text in ("`Trainer.fit` stopped", "Epoch ", "interactive attention views of", "head importance",
                     "model analysis: ", "Testing ", "final metrics")
    ]  # fmt: skip
    assert order == sorted(order), shown  # the pages and the analysis below the finished epoch bar, not under it
    # the lines as printed, before the terminal wraps them: each fits its 120 columns, broken between words, but a
    # path longer than that, alone on its line (the terminal wraps it; selected, it is one line again); the
    # analysis folder's path whole on a line of its own
    printed = screen(out, width=10**6)
    assert all(len(line) <= COLUMNS or len(line.split()) == 1 for line in printed), shown
    paths = [line.strip() for line in printed if line.strip().endswith("/analysis")]
    assert [p for p in paths if Path(p).is_dir() and Path(p).is_relative_to(log_dir)], printed


def test_the_console_handler_writes_to_stdout_as_it_is_at_each_line(capsys):
    handler, record = ConsoleHandler(sys.stderr), logging.makeLogRecord({"msg": "a line", "levelno": logging.INFO})
    handler.emit(record)  # capsys swapped sys.stdout after the handler was made: the line goes there
    assert capsys.readouterr().out == "a line\n"
