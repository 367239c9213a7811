"""Numbers and tables for people: byte sizes in binary units, and aligned text tables."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def format_size(size: float) -> str:
    """`1536` -> `'1.50 KiB'`: binary units with two decimals, as the tables print sizes."""
    if abs(size) < 1024:
        return f"{size:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if abs(size) < 1024 or unit == "GiB":
            return f"{size:.2f} {unit}"
    raise AssertionError("unreachable")


def binary_label(value: float) -> str:
    """`0 B`, `512 B`, `1.5 KiB`, `32 MiB`: a tick label in the largest binary unit it reaches."""
    for power, unit in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
        if abs(value) >= 1024**power:
            return f"{value / 1024**power:g} {unit}"
    return f"{value:g} B"


def plural(count: int, noun: str) -> str:
    """`1 buffer`, `2 buffers`, `1,042 buffers`."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], left: Collection[int] = (0,), indent: str = "") -> list[str]:
    """The lines of a table with aligned columns: those in `left` flush left, the rest (numbers)
    flush right."""
    cells = [header, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [
        (indent + "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))).rstrip()
        for row in cells
    ]
