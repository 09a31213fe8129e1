"""CSV cells that a spreadsheet will not run as formulas."""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value) -> str:
    """Text a person typed (names, reasons), prefixed with ' when a spreadsheet would run it.

    Exports are opened in spreadsheets by finance and admins; a username like
    ``=HYPERLINK(...)`` must arrive as text, not as a formula.
    """
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in FORMULA_STARTS else text
