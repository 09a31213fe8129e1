"""Kubernetes resource quantities ("500m", "2Gi", "1e3") as exact fractions."""

from __future__ import annotations

import re
from fractions import Fraction

_SUFFIX = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")


class QuantityError(ValueError):
    pass


def parse(value: object) -> Fraction:
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    text = str(value).strip()
    m = _QUANTITY.match(text)
    if not m:
        raise QuantityError(
            f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}"
        )
    number = Fraction(m.group(1))
    if m.group(2):
        return number * Fraction(10) ** int(m.group(2)[1:])
    return number * _SUFFIX[m.group(3) or ""]


def is_valid(value: object) -> bool:
    try:
        parse(value)
    except QuantityError:
        return False
    return True


def format_quantity(value: Fraction, resource: str = "") -> str:
    """A canonical-looking string: "2", "1500m", "64Gi", "1536Mi"."""
    value = Fraction(value)
    if ("memory" in resource or "storage" in resource) and value.denominator == 1 and value:
        n = value.numerator
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            unit = _SUFFIX[suffix].numerator
            if n % unit == 0:
                return f"{n // unit}{suffix}"
        return str(n)
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return f"{int(value * 10**9)}n"
