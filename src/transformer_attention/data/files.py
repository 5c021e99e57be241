"""Cheap checks of local data files before `datasets` reads them, so that a bad file fails with its cause
(empty, not UTF-8 text, a malformed JSON line, a header and no rows, not Parquet, another format than its
extension says) in one line, instead of `datasets`' "An error occurred while generating the dataset". Standard
library only; each check reads the file once, in chunks (parquet: its first and last four bytes). A CSV field
may be as long as the file (Python's csv module stops at 131,072 characters unless told otherwise).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
from pathlib import Path

from ..errors import DataError
from .labels import check_integers_or_words

CHUNK = 1 << 20
PARQUET_MAGIC = b"PAR1"


def check_file(path: str | Path, fmt: str, encoding: str = "utf-8", label_column: str | None = None) -> list[str]:
    """Raise DataError naming `path` and the fix when the file cannot hold rows of format `fmt`
    ("parquet", "csv" or "json"; a .tsv is "csv") in `encoding`. Returns a CSV file's `label_column`
    values (a CSV has no types: integers and words in one column are checked across files)."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p} is not a regular file (a FIFO, socket or device): give a {fmt} file")
    size = p.stat().st_size
    if size == 0:
        raise DataError(f"file {p} is empty (0 bytes): write the {fmt} rows into it, or leave it out")
    if fmt == "parquet":
        _check_parquet(p, size)
        return []
    text = _decode(p, encoding)
    if not text.strip():
        raise DataError(f"file {p} is empty ({size} bytes of whitespace): write the {fmt} rows into it")
    if fmt == "csv":
        return _check_csv(p, text, label_column)
    if fmt == "json":
        _check_json(p, text)
    return []


def _check_parquet(p: Path, size: int) -> None:
    with open(p, "rb") as f:
        head = f.read(4)
        f.seek(max(0, size - 4))
        tail = f.read(4)
    if head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
        what = "truncated (it does not end like one)" if head == PARQUET_MAGIC else f"it starts with {head!r}"
        with open(p, "rb") as f:
            text = f.read(4096).decode("utf-8", errors="replace")
        seen = looks_like(text) if head != PARQUET_MAGIC else None
        fix = f"rename it to {p.stem}{SUFFIXES[seen]}" if seen else "write it again, or rename it"
        looks = f", it looks {seen}" if seen else ""
        raise DataError(f"file {p} ({size} bytes) is not a Parquet file: {what}{looks}; {fix}")


def _decode(p: Path, encoding: str) -> str:
    """The file's text in `encoding`; a byte that does not decode is a DataError with its line and the fix."""
    decoder = codecs.getincrementaldecoder(encoding)()
    parts: list[str] = []
    line, offset = 1, 0
    with open(p, "rb") as f:
        while chunk := f.read(CHUNK):
            if b"\x00" in chunk:
                at = offset + chunk.index(b"\x00")
                raise DataError(
                    f"file {p} is binary, not {encoding} text (a NUL byte at offset {at}): give a .parquet file "
                    f"that name, or a text file in this format"
                )
            try:
                parts.append(decoder.decode(chunk))
            except UnicodeDecodeError as err:
                done = "".join(parts)  # the text before this chunk
                bad = chunk[err.start : err.start + 1]
                line += done.count("\n") + chunk[: err.start].count(b"\n")
                raise DataError(
                    f"file {p} is not {encoding} text: byte {bad.hex()} at line {line} (offset {offset + err.start}); "
                    f"convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8), or name its encoding: data.encoding=latin-1"
                ) from None
            offset += len(chunk)
        try:
            parts.append(decoder.decode(b"", final=True))
        except UnicodeDecodeError:
            raise DataError(
                f"file {p} is not {encoding} text: it ends inside a multi-byte character (truncated?); "
                f"convert it to UTF-8, or name its encoding: data.encoding=latin-1"
            ) from None
    return "".join(parts)


# what a file's text looks like (`looks_like`), and the extension that reads it as that
SUFFIXES = {"like JSON": ".jsonl", "tab-separated (TSV)": ".tsv", "comma-separated (CSV)": ".csv"}


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


def _check_csv(p: Path, text: str, label_column: str | None) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    tsv = p.suffix.lower() == ".tsv"
    first = lines[0]
    if (seen := looks_like(text)) not in (None, "tab-separated (TSV)" if tsv else "comma-separated (CSV)"):
        raise DataError(
            f"file {p} is named {p.suffix} but looks {seen} (its first line: {first[:80]!r}); rename it to "
            f"{p.stem}{SUFFIXES[seen]}: a file's format goes by its extension"
        )
    if len(lines) < 2:
        raise DataError(f"file {p} has no rows after the header ({first[:80]!r}): add rows, or leave the file out")
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
            first = text.lstrip().split("\n", 1)[0]
            raise DataError(
                f"file {p} is named {p.suffix} but looks {seen} (its first line: {first[:80]!r}); rename it to "
                f"{p.stem}{SUFFIXES[seen]}: a file's format goes by its extension"
            ) from None
        if text.lstrip().startswith("["):  # one document: its own error position
            raise DataError(f"file {p} is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}") from None
        doc = None
    if doc is None:
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(
                    f"file {p}: line {number} is not valid JSON ({err.msg}, column {err.colno}): {line[:80]!r}; "
                    f"fix or remove that line (JSON Lines: one record per line)"
                ) from None
        return
    if isinstance(doc, list) and not doc:
        raise DataError(f"file {p} holds no rows (an empty JSON array): add records, or leave the file out")
