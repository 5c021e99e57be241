"""Cheap checks of local data files before `datasets` reads them, so that a bad file fails with its cause (empty,
not text in its encoding, a malformed JSON line, a header and no rows, another format than its extension says) in
one line, instead of `datasets`' "An error occurred while generating the dataset". Standard library only."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ..errors import DataError
from .labels import check_integers_or_words

PARQUET_MAGIC = b"PAR1"
# what a file's text looks like (`looks_like`), and the extension that reads it as that
SUFFIXES = {"like JSON": ".jsonl", "tab-separated (TSV)": ".tsv", "comma-separated (CSV)": ".csv"}


def check_file(path: str | Path, fmt: str, encoding: str = "utf-8", label_column: str | None = None) -> list[str]:
    """Raise DataError naming `path` and the fix when the file cannot hold rows of format `fmt` ("parquet", "csv"
    or "json") in `encoding`. Returns a CSV file's `label_column` values (checked across files: a CSV has no
    types)."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p} is not a regular file (a FIFO, socket or device): give a {fmt} file")
    size = p.stat().st_size
    if size == 0:
        raise DataError(f"file {p} is empty (0 bytes): write the {fmt} rows into it, or leave it out")
    if fmt == "parquet":
        _check_parquet(p, size)
        return []
    text = _decode(p, p.read_bytes(), encoding)
    if not text.strip():
        raise DataError(f"file {p} is empty ({size} bytes of whitespace): write the {fmt} rows into it")
    if fmt == "csv":
        return _check_csv(p, text, label_column)
    _check_json(p, text)
    return []


def _check_parquet(p: Path, size: int) -> None:
    with open(p, "rb") as f:
        start = f.read(4096)
        f.seek(max(0, size - 4))
        tail = f.read(4)
    if start[:4] != PARQUET_MAGIC or tail != PARQUET_MAGIC:
        ours = start[:4] == PARQUET_MAGIC
        what = "truncated (it does not end like one)" if ours else f"it starts with {start[:4]!r}"
        seen = None if ours else looks_like(start.decode("utf-8", errors="replace"))
        looks = f", it looks {seen}" if seen else ""
        fix = f"rename it to {p.stem}{SUFFIXES[seen]}" if seen else "write it again, or rename it"
        raise DataError(f"file {p} ({size} bytes) is not a Parquet file: {what}{looks}; {fix}")


def _decode(p: Path, data: bytes, encoding: str) -> str:
    """The file's text; a NUL byte or one that does not decode is a DataError with where and the fix."""
    if (at := data.find(b"\x00")) >= 0:
        raise DataError(
            f"file {p} is binary, not {encoding} text (a NUL byte at offset {at}): give a .parquet file that "
            "name, or a text file in this format"
        )
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        line, byte = data[: err.start].count(b"\n") + 1, data[err.start : err.start + 1].hex()
        raise DataError(
            f"file {p} is not {encoding} text: byte {byte} at line {line} (offset {err.start}); convert it to "
            "UTF-8 (e.g. iconv -f latin1 -t utf-8), or name its encoding: data.encoding=latin-1"
        ) from None


def looks_like(text: str) -> str | None:
    """What the start of a text file looks like: JSON (a record or an array), tab- or comma-separated (its first
    line holds one delimiter and not the other), or None when it is none of these for sure."""
    head = text.lstrip()
    first = head.split("\n", 1)[0]
    if head.startswith(("{", "[")):
        return "like JSON"
    if "\t" in first and "," not in first:
        return "tab-separated (TSV)"
    if "," in first and "\t" not in first:
        return "comma-separated (CSV)"
    return None


def _misnamed(p: Path, text: str, seen: str) -> DataError:
    first = text.lstrip().split("\n", 1)[0]
    return DataError(
        f"file {p} is named {p.suffix} but looks {seen} (its first line: {first[:80]!r}); rename it to "
        f"{p.stem}{SUFFIXES[seen]}: a file's format goes by its extension"
    )


def _check_csv(p: Path, text: str, label_column: str | None) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    tsv = p.suffix.lower() == ".tsv"
    if (seen := looks_like(text)) not in (None, "tab-separated (TSV)" if tsv else "comma-separated (CSV)"):
        raise _misnamed(p, text, seen)
    if len(lines) < 2:
        raise DataError(f"file {p} has no rows after the header ({lines[0][:80]!r}): add rows, or leave it out")
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, len(text) + 1))  # no field is longer than the file: a review of any length
    try:
        records = csv.reader(io.StringIO(text, newline=""), delimiter="\t" if tsv else ",")
        header = next(records)
        if label_column not in header:
            return []  # the missing column is named later, with the columns present
        k = header.index(label_column)
        labels = [record[k].strip() for record in records if len(record) > k and record[k].strip()]
    finally:
        csv.field_size_limit(limit)
    check_integers_or_words(labels, where=f" in {p}")
    return labels


def _check_json(p: Path, text: str) -> None:
    """A JSON document (an array of records) or JSON Lines (one record per line)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        if (seen := looks_like(text)) in ("tab-separated (TSV)", "comma-separated (CSV)"):
            raise _misnamed(p, text, seen) from None
        if text.lstrip().startswith("["):  # one document: its own error position
            raise DataError(f"file {p} is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}") from None
        for number, line in enumerate(text.split("\n"), start=1):
            try:
                if line.strip():
                    json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(
                    f"file {p}: line {number} is not valid JSON ({err.msg}, column {err.colno}): {line[:80]!r}; "
                    f"fix or remove that line (JSON Lines: one record per line)"
                ) from None
        return
    if isinstance(doc, list) and not doc:
        raise DataError(f"file {p} holds no rows (an empty JSON array): add records, or leave the file out")
