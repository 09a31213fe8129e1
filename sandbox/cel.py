"""The small subset of CEL the sandbox evaluates for DRA device selectors.

Supported: terms joined with ``&&``, each comparing one device field to a literal:

    device.driver == 'gpu.nvidia.com'
    device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'
    device.attributes["gpu.nvidia.com"]["profile"] != "1g.10gb"

with ``==`` or ``!=`` and a string (single or double quotes), integer or boolean
literal. Anything else (``||``, ``matches()``, ``compareTo()``, capacity, ...) is
rejected when the claim is created, with a message that says what is supported,
rather than silently matching nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_TERM = re.compile(
    r"""^device\s*\.\s*(?:
        attributes\s*\[\s*(?P<q1>['"])(?P<domain>[^'"]+)(?P=q1)\s*\]\s*
        (?:\.\s*(?P<attr>[A-Za-z_][A-Za-z0-9_]*)|\[\s*(?P<q2>['"])(?P<attr2>[^'"]+)(?P=q2)\s*\])
        |(?P<driver>driver))
        \s*(?P<op>==|!=)\s*
        (?P<value>'[^']*'|"[^"]*"|-?\d+|true|false)$""",
    re.VERBOSE,
)

SUPPORTED = (
    "device.driver == '<driver>' and device.attributes['<domain>'].<name> == '<value>' "
    "(or !=, double quotes, integer or boolean literals), joined with &&"
)


class CelError(ValueError):
    pass


@dataclass(frozen=True)
class Term:
    domain: str  # "" for device.driver
    attribute: str
    equal: bool
    value: Any

    def matches(self, driver: str, attributes: dict[str, dict[str, Any]]) -> bool:
        if not self.domain:
            actual = driver
        else:
            domain = attributes.get(self.domain) or {}
            if self.attribute not in domain:
                return False  # a CEL runtime error ("no such key"): the device does not match
            actual = domain[self.attribute]
        return (actual == self.value) == self.equal


def _strip_parens(text: str) -> str:
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    return text


def compile_expression(expression: str) -> tuple[Term, ...]:
    if "||" in expression:
        raise CelError(f"the sandbox cannot evaluate {expression.strip()!r}: '||' is not supported; use {SUPPORTED}")
    terms = []
    for raw in expression.split("&&"):
        text = _strip_parens(" ".join(raw.split()))
        m = _TERM.match(text)
        if not m:
            raise CelError(f"the sandbox cannot evaluate CEL term {text!r}; supported: {SUPPORTED}")
        literal = m.group("value")
        if literal[0] in "'\"":
            value: Any = literal[1:-1]
        elif literal in ("true", "false"):
            value = literal == "true"
        else:
            value = int(literal)
        if m.group("driver"):
            terms.append(Term("", "driver", m.group("op") == "==", value))
        else:
            terms.append(Term(m.group("domain"), m.group("attr") or m.group("attr2"), m.group("op") == "==", value))
    return tuple(terms)


def matches(terms: tuple[Term, ...], driver: str, attributes: dict[str, dict[str, Any]]) -> bool:
    return all(t.matches(driver, attributes) for t in terms)


def selectors_of(request: dict[str, Any]) -> list[str]:
    """CEL expressions of one device request (v1 ``exactly`` or the older flat form)."""
    body = request.get("exactly") or request
    return [s["cel"]["expression"] for s in body.get("selectors") or [] if isinstance(s, dict) and "cel" in s]


def check_claim_spec(spec: dict[str, Any], prefix: str) -> list[tuple[str, str]]:
    """(field, message) for every selector the sandbox could not evaluate."""
    problems = []
    for i, request in enumerate((spec.get("devices") or {}).get("requests") or []):
        if not isinstance(request, dict):
            continue
        if request.get("firstAvailable"):
            problems.append(
                (
                    f"{prefix}.devices.requests[{i}].firstAvailable",
                    "the sandbox does not support firstAvailable sub-requests; use exactly",
                )
            )
        base = f"{prefix}.devices.requests[{i}]" + (".exactly" if "exactly" in request else "")
        for j, expr in enumerate(selectors_of(request)):
            try:
                compile_expression(expr)
            except CelError as exc:
                problems.append((f"{base}.selectors[{j}].cel.expression", str(exc)))
    return problems
