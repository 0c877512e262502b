"""Markdown pieces shared by the evaluate report and the table of runs."""

from __future__ import annotations


def cell(value: object) -> str:
    """A table cell: one line, with the characters that would break a table escaped."""
    text = "" if value is None else str(value)
    return " ".join(text.split()).replace("\\", "\\\\").replace("|", "\\|")


def table(header: list[str], rows: list[list[object]]) -> str:
    """A GitHub-flavoured Markdown table."""
    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "|".join(" --- " for _ in header) + "|")
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt(value: float | None, digits: int = 2) -> str:
    """A score with fixed decimals; "" when there is none."""
    return "" if value is None else f"{value:.{digits}f}"
