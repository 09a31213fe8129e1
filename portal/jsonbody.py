"""How deeply a JSON request body may nest, checked before anything parses it.

Python's json module recurses once per level: a body of 1,000 nested ``[`` raised
RecursionError inside DRF's parser, a 500 (and any recursive walk over the parsed data
would be next). Nothing the portal accepts nests more than a few levels (a workload's
``env`` or ``annotations`` are two), so a body nested more than ``MAX_DEPTH`` levels is
refused with a 400 that says why. The check scans the raw bytes without recursing.
"""

from __future__ import annotations

import itertools
import re

MAX_DEPTH = 32

# A JSON string, escapes included (unrolled so the match is linear): brackets inside
# strings are text, not nesting.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def nesting_depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text (0 for a scalar).

    Malformed text gets a number too (unbalanced brackets count as they come); the JSON
    parser reports what is wrong with it afterwards.
    """
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


def depth_over_limit(raw: bytes) -> int:
    """The body's nesting depth if it is more than ``MAX_DEPTH``, else 0."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:  # the common case: it cannot be too deep
        return 0
    depth = nesting_depth(raw)
    return depth if depth > MAX_DEPTH else 0


def too_deep_message(depth: int) -> str:
    return (
        f"The JSON body nests arrays and objects {depth} levels deep; at most {MAX_DEPTH} are accepted "
        "(no request field needs more than a few)."
    )


def is_json(content_type: str) -> bool:
    """``application/json`` and ``application/<anything>+json``, parameters ignored."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))
