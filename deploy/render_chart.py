"""Render the gpu-portal Helm chart without helm: a small interpreter of the Go-template subset it uses.

Why this exists: the tests render the chart and validate every object, and the machines
that run them have no helm binary (no registry here ships one). ``helm template`` and
this module must agree on the chart; to keep that true, the chart is written in a small
subset of Go templates and Sprig, which this module implements with Go's and Helm's
semantics, and refuses everything else by name (so a template that strays fails in the
tests rather than rendering differently):

- actions ``{{ pipeline }}``, comments ``{{/* */}}``, trim markers ``{{-`` and ``-}}``;
- ``if`` / ``else if`` / ``else``, ``with`` (and its ``else``), ``range`` over lists and
  maps (maps in key order) with ``$v`` or ``$k, $v`` variables, ``define``, ``end``;
- operands: ``.``, ``.A.B``, ``$``, ``$.A``, ``$v.A``, strings, integers, ``true``,
  ``false``, ``nil`` and ``( pipeline )``; pipelines with ``|``;
- functions: ``include``, ``default``, ``required``, ``fail``, ``quote``, ``toYaml``,
  ``toJson``, ``indent``, ``nindent``, ``trunc``, ``trimSuffix``, ``contains``,
  ``printf`` (``%s``, ``%d``, ``%v``, ``%q``), ``dict``, ``eq``, ``ne``, ``lt``, ``gt``,
  ``and``, ``or``, ``not``, ``empty``, ``int``, ``toString``, ``sha256sum``, ``b64enc``.

Helm's own behaviour kept: values are deep-merged over ``values.yaml`` (a ``null``
deletes a key); numbers from YAML values behave as Go's float64 (``1000000`` prints as
``1e+06``, as it does in helm); a missing value prints as nothing; files starting with
``_`` and ``NOTES.txt`` define but do not render; output is split into YAML documents.

    python -m deploy.render_chart [-f values.yaml]... [--set-file key=path]... [--name NAME] [--namespace NS]
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import json
import math
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parent / "helm" / "gpu-portal"


class TemplateError(Exception):
    """A template the subset cannot render, or a ``required``/``fail`` that stopped rendering."""


# -- lexing ------------------------------------------------------------------------------


@dataclass
class Text:
    text: str


@dataclass
class Action:
    body: str
    where: str


def lex(source: str, name: str) -> list[Text | Action]:
    """Split into text and actions, applying the trim markers as Go does."""
    items: list[Text | Action] = []
    pos = 0
    trim_next = False
    while True:
        start = source.find("{{", pos)
        text = source[pos:] if start < 0 else source[pos:start]
        if trim_next:
            text = text.lstrip(" \t\r\n")
        if start < 0:
            items.append(Text(text))
            return items
        inner_start = start + 2
        trim_prev = source.startswith("- ", inner_start) or source.startswith("-\n", inner_start)
        if trim_prev:
            text = text.rstrip(" \t\r\n")
            inner_start += 1
        items.append(Text(text))
        end = _action_end(source, inner_start, name)
        inner = source[inner_start:end]
        trim_next = inner.endswith(" -") or inner.endswith("\n-")
        if trim_next:
            inner = inner[:-1]
        line = source.count("\n", 0, start) + 1
        inner = inner.strip()
        if not (inner.startswith("/*") and inner.endswith("*/")):
            items.append(Action(inner, f"{name}:{line}"))
        pos = end + 2


def _action_end(source: str, pos: int, name: str) -> int:
    quote = ""
    i = pos
    while i < len(source):
        c = source[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in '"`':
            quote = c
        elif source.startswith("}}", i):
            return i
        elif source.startswith("/*", i):
            close = source.find("*/", i + 2)
            if close < 0:
                break
            i = close + 2
            continue
        i += 1
    raise TemplateError(f"{name}: unclosed action")


# -- expressions -------------------------------------------------------------------------

TOKEN = re.compile(
    r"""\s*(?:
      (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<raw>`[^`]*`)
    | (?P<number>-?\d+(?:\.\d+)?)
    | (?P<declare>:=)
    | (?P<punct>[|(),=])
    | (?P<variable>\$[A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)
    | (?P<field>(?:\.[A-Za-z0-9_]+)+|\.)
    | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)


def tokens(text: str, where: str) -> list[tuple[str, str]]:
    out = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise TemplateError(f"{where}: cannot read {text[pos:]!r}")
        kind = match.lastgroup or ""
        out.append((kind, match.group(kind)))
        pos = match.end()
    return out


@dataclass
class Operand:
    kind: str  # string, number, bool, nil, field, variable, ident, pipeline
    value: Any


@dataclass
class Pipeline:
    commands: list[list[Operand]]
    where: str
    declare: list[str] = field(default_factory=list)


def parse_pipeline(text: str, where: str, allow_declare: bool = False) -> Pipeline:
    toks = tokens(text, where)
    declare: list[str] = []
    if allow_declare and any(kind == "declare" for kind, _ in toks):
        while toks and toks[0][0] != "declare":
            kind, value = toks.pop(0)
            if kind == "variable":
                declare.append(value)
            elif value != ",":
                raise TemplateError(f"{where}: bad variable declaration")
        toks.pop(0)
    pipeline, rest = _pipeline(toks, where)
    if rest:
        raise TemplateError(f"{where}: unexpected {rest[0][1]!r}")
    pipeline.declare = declare
    return pipeline


def _pipeline(toks: list[tuple[str, str]], where: str) -> tuple[Pipeline, list[tuple[str, str]]]:
    commands: list[list[Operand]] = [[]]
    while toks:
        kind, value = toks[0]
        if value == ")":
            break
        toks = toks[1:]
        if value == "|":
            commands.append([])
        elif value == "(":
            inner, toks = _pipeline(toks, where)
            if not toks or toks[0][1] != ")":
                raise TemplateError(f"{where}: missing )")
            toks = toks[1:]
            commands[-1].append(Operand("pipeline", inner))
        elif kind == "string":
            commands[-1].append(Operand("string", json.loads(value)))
        elif kind == "raw":
            commands[-1].append(Operand("string", value[1:-1]))
        elif kind == "number":
            commands[-1].append(Operand("number", float(value) if "." in value else int(value)))
        elif kind == "ident" and value in ("true", "false"):
            commands[-1].append(Operand("bool", value == "true"))
        elif kind == "ident" and value == "nil":
            commands[-1].append(Operand("nil", None))
        elif kind in ("field", "variable", "ident"):
            commands[-1].append(Operand(kind, value))
        else:
            raise TemplateError(f"{where}: unexpected {value!r}")
    if any(not command for command in commands):
        raise TemplateError(f"{where}: empty command in pipeline")
    return Pipeline(commands, where), toks


# -- parsing -----------------------------------------------------------------------------


@dataclass
class Output:
    pipeline: Pipeline


@dataclass
class If:
    branches: list[tuple[Pipeline | None, list]]


@dataclass
class With:
    pipeline: Pipeline
    body: list
    otherwise: list


@dataclass
class Range:
    pipeline: Pipeline
    body: list
    otherwise: list


KEYWORDS = {"if", "else", "end", "range", "with", "define", "template", "block", "break", "continue"}


def parse(items: list[Text | Action], defines: dict[str, list]) -> list:
    nodes, stop, rest = _parse(items, defines, ())
    if stop is not None:
        raise TemplateError(f"{stop.where}: unexpected {{{{ {stop.body} }}}}")
    return nodes


def _parse(items, defines, stops) -> tuple[list, Action | None, list]:
    nodes: list = []
    while items:
        item, items = items[0], items[1:]
        if isinstance(item, Text):
            if item.text:
                nodes.append(item)
            continue
        word = item.body.split(None, 1)[0] if item.body else ""
        rest = item.body[len(word) :].strip()
        if word in ("end", "else"):
            if word not in stops:
                raise TemplateError(f"{item.where}: unexpected {word}")
            return nodes, item, items
        if word == "if":
            nodes_if, items = _parse_if(item, rest, items, defines)
            nodes.append(nodes_if)
        elif word in ("with", "range"):
            pipeline = parse_pipeline(rest, item.where, allow_declare=word == "range")
            body, stop, items = _parse(items, defines, ("end", "else"))
            otherwise: list = []
            if stop is not None and stop.body == "else":
                otherwise, stop, items = _parse(items, defines, ("end",))
            if stop is None:
                raise TemplateError(f"{item.where}: {word} without end")
            nodes.append(With(pipeline, body, otherwise) if word == "with" else Range(pipeline, body, otherwise))
        elif word == "define":
            name = json.loads(rest)
            body, stop, items = _parse(items, defines, ("end",))
            if stop is None:
                raise TemplateError(f"{item.where}: define without end")
            defines[name] = body
        elif word in KEYWORDS:
            raise TemplateError(f"{item.where}: {word!r} is outside the chart's template subset (deploy/README.md)")
        else:
            nodes.append(Output(parse_pipeline(item.body, item.where)))
    return nodes, None, items


def _parse_if(item: Action, condition: str, items, defines) -> tuple[If, list]:
    branches: list[tuple[Pipeline | None, list]] = []
    current: Pipeline | None = parse_pipeline(condition, item.where)
    while True:
        body, stop, items = _parse(items, defines, ("end", "else"))
        branches.append((current, body))
        if stop is None:
            raise TemplateError(f"{item.where}: if without end")
        if stop.body == "end":
            return If(branches), items
        rest = stop.body[len("else") :].strip()
        if rest.startswith("if "):
            current = parse_pipeline(rest[3:], stop.where)
        elif rest:
            raise TemplateError(f"{stop.where}: 'else {rest.split()[0]}' is outside the chart's template subset")
        else:
            body, stop, items = _parse(items, defines, ("end",))
            if stop is None:
                raise TemplateError(f"{item.where}: else without end")
            branches.append((None, body))
            return If(branches), items


# -- values as Go sees them --------------------------------------------------------------


def truthy(value: Any) -> bool:
    """Go templates' truth: false, 0, nil and empty strings, lists and maps are false."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float | str | list | tuple | dict):
        return bool(value)
    return True


def go_number(value: int | float) -> str:
    """A number as helm prints a value from a values file: Go's float64 with %v.

    That is the shortest decimal that reads back the same, in exponent form when the
    exponent is below -4 or at least 6: ``1000000`` prints as ``1e+06``, as in helm.
    """
    number = float(value)
    if number != number:
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    if number == 0:
        return "0"
    sign, digit_tuple, exponent = Decimal(repr(number)).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + int(exponent)
    minus = "-" if sign else ""
    power = point - 1
    if power < -4 or power >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{minus}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{minus}{digits}{'0' * (point - len(digits))}"
    return f"{minus}{digits[:point]}.{digits[point:]}"


def strval(value: Any) -> str:
    """A value printed into the output (Sprig's strval for functions that take strings)."""
    if value is None:
        return ""  # helm prints "<no value>" and then removes it
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return go_number(value)
    if isinstance(value, str):
        return value
    raise TemplateError(f"printing a {type(value).__name__} is outside the subset: use toYaml or toJson")


def to_yaml(value: Any) -> str:
    if value is None:
        return "null"
    text = yaml.safe_dump(_plain(value), default_flow_style=False, sort_keys=True, width=1 << 16, allow_unicode=True)
    if text.endswith("\n...\n"):
        text = text[: -len("\n...\n")]
    return text.rstrip("\n")


def to_json(value: Any) -> str:
    text = json.dumps(_plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # Go's encoding/json escapes these for safe embedding in HTML.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _plain(value: Any) -> Any:
    """Integral floats back to ints, as Go's marshallers print 2.0 as 2."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def go_quote(text: str) -> str:
    """Go's %q (strconv.Quote) for the strings a chart carries."""
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def to_int(value: Any) -> int:
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return int(value)
    try:
        return int(str(value), 0)
    except ValueError:
        return 0


def _printf(fmt: str, *args: Any) -> str:
    values = iter(args)

    def one(match: re.Match) -> str:
        verb = match.group(1)
        if verb == "%":
            return "%"
        try:
            value = next(values)
        except StopIteration:
            return f"%!{verb}(MISSING)"
        if verb == "q":
            return go_quote(strval(value))
        if verb == "d":
            return str(to_int(value))
        return strval(value)

    return re.sub(r"%([sdvq%])", one, fmt)


# -- evaluation --------------------------------------------------------------------------


class Renderer:
    def __init__(self, defines: dict[str, list]) -> None:
        self.defines = defines
        self.functions: dict[str, Callable[..., Any]] = {
            "include": self.include,
            "default": lambda default, value=None: value if truthy(value) else default,
            "required": _required,
            "fail": _fail,
            "quote": lambda *values: " ".join(go_quote(strval(v)) for v in values if v is not None),
            "toYaml": to_yaml,
            "toJson": to_json,
            "indent": lambda n, text: _indent(to_int(n), strval(text)),
            "nindent": lambda n, text: "\n" + _indent(to_int(n), strval(text)),
            "trunc": _trunc,
            "trimSuffix": lambda suffix, text: strval(text).removesuffix(strval(suffix)),
            "contains": lambda part, text: strval(part) in strval(text),
            "printf": lambda fmt, *args: _printf(strval(fmt), *args),
            "dict": _dict,
            "eq": lambda a, *others: any(_same(a, b) for b in others),
            "ne": lambda a, b: not _same(a, b),
            "lt": lambda a, b: a < b,
            "gt": lambda a, b: a > b,
            "and": _and,
            "or": _or,
            "not": lambda value: not truthy(value),
            "empty": lambda value=None: not truthy(value),
            "int": to_int,
            "toString": strval,
            "sha256sum": lambda text: hashlib.sha256(strval(text).encode()).hexdigest(),
            "b64enc": lambda text: base64.b64encode(strval(text).encode()).decode(),
        }

    def render(self, nodes: list, dot: Any, variables: dict[str, Any]) -> str:
        return "".join(self._node(node, dot, variables) for node in nodes)

    def include(self, name: str, data: Any = None) -> str:
        if name not in self.defines:
            raise TemplateError(f"include: no template named {name!r}")
        return self.render(self.defines[name], data, {"$": data})

    def _node(self, node: Any, dot: Any, variables: dict[str, Any]) -> str:
        if isinstance(node, Text):
            return node.text
        if isinstance(node, Output):
            return strval(self.pipeline(node.pipeline, dot, variables))
        if isinstance(node, If):
            for condition, body in node.branches:
                if condition is None or truthy(self.pipeline(condition, dot, variables)):
                    return self.render(body, dot, variables)
            return ""
        if isinstance(node, With):
            value = self.pipeline(node.pipeline, dot, variables)
            if truthy(value):
                return self.render(node.body, value, variables)
            return self.render(node.otherwise, dot, variables)
        if isinstance(node, Range):
            return self._range(node, dot, variables)
        raise AssertionError(node)

    def _range(self, node: Range, dot: Any, variables: dict[str, Any]) -> str:
        value = self.pipeline(node.pipeline, dot, variables)
        if not truthy(value):
            return self.render(node.otherwise, dot, variables)
        if isinstance(value, dict):
            pairs: list[tuple[Any, Any]] = [(k, value[k]) for k in sorted(value)]
        elif isinstance(value, list | tuple):
            pairs = list(enumerate(value))
        else:
            raise TemplateError(f"{node.pipeline.where}: range over a {type(value).__name__}")
        names = node.pipeline.declare
        out = []
        for key, item in pairs:
            scope = dict(variables)
            if len(names) == 1:
                scope[names[0]] = item
            elif len(names) == 2:
                scope[names[0]], scope[names[1]] = key, item
            out.append(self.render(node.body, item, scope))
        return "".join(out)

    def pipeline(self, pipeline: Pipeline, dot: Any, variables: dict[str, Any]) -> Any:
        value: Any = _NOTHING
        for command in pipeline.commands:
            value = self._command(command, dot, variables, value, pipeline.where)
        return value

    def _command(self, command: list[Operand], dot, variables, piped, where: str) -> Any:
        head = command[0]
        if head.kind == "ident":
            function = self.functions.get(head.value)
            if function is None:
                raise TemplateError(
                    f"{where}: {head.value!r} is outside the chart's template subset (deploy/README.md)"
                )
            args = [self._operand(op, dot, variables, where) for op in command[1:]]
            if piped is not _NOTHING:
                args.append(piped)
            try:
                return function(*args)
            except TemplateError as exc:
                raise TemplateError(f"{where}: {exc}") from None
            except TypeError as exc:
                raise TemplateError(f"{where}: {head.value}: {exc}") from None
        if len(command) > 1 or piped is not _NOTHING:
            raise TemplateError(f"{where}: {head.value!r} is not a function and takes no arguments")
        return self._operand(head, dot, variables, where)

    def _operand(self, op: Operand, dot, variables, where: str) -> Any:
        if op.kind in ("string", "number", "bool", "nil"):
            return op.value
        if op.kind == "pipeline":
            return self.pipeline(op.value, dot, variables)
        if op.kind == "field":
            return _fields(dot, [] if op.value == "." else op.value[1:].split("."), where)
        if op.kind == "variable":
            name, *path = op.value.split(".")
            if name not in variables:
                raise TemplateError(f"{where}: undefined variable {name}")
            return _fields(variables[name], path, where)
        raise TemplateError(f"{where}: {op.value!r} is outside the chart's template subset")


_NOTHING = object()


def _fields(value: Any, path: list[str], where: str) -> Any:
    walked = ""
    for name in path:
        if value is None:
            raise TemplateError(f"{where}: nil pointer evaluating {walked or '.'}.{name}")
        if not isinstance(value, dict):
            raise TemplateError(f"{where}: can't evaluate field {name} in a {type(value).__name__}")
        value = value.get(name)
        walked += f".{name}"
    return value


def _required(message: str, value: Any = None) -> Any:
    if value is None or (isinstance(value, str) and value == ""):
        raise TemplateError(message)
    return value


def _fail(message: str) -> Any:
    raise TemplateError(message)


def _indent(n: int, text: str) -> str:
    pad = " " * n
    return pad + text.replace("\n", "\n" + pad)


def _trunc(n: Any, text: Any) -> str:
    n, text = to_int(n), strval(text)
    if n < 0:
        return text[n:] if len(text) > -n else text
    return text[:n]


def _dict(*pairs: Any) -> dict:
    if len(pairs) % 2:
        pairs = (*pairs, "")
    return {strval(pairs[i]): pairs[i + 1] for i in range(0, len(pairs), 2)}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool | type(None)):
        return float(a) == float(b)
    return type(a) is type(b) and a == b


def _and(*values: Any) -> Any:
    for value in values:
        if not truthy(value):
            return value
    return values[-1]


def _or(*values: Any) -> Any:
    for value in values:
        if truthy(value):
            return value
    return values[-1]


# -- the chart ---------------------------------------------------------------------------


def merge_values(base: Any, override: Any) -> Any:
    """Helm's coalescing: maps merge key by key, anything else replaces, null deletes."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return copy.deepcopy(override)
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_values(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def as_float64(value: Any) -> Any:
    """Numbers in values files as Go's YAML-to-JSON decoding gives them to templates."""
    if isinstance(value, dict):
        return {k: as_float64(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_float64(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


@dataclass
class Rendered:
    files: dict[str, str]
    notes: str

    @property
    def documents(self) -> list[dict]:
        out = []
        for name in sorted(self.files):
            for doc in yaml.safe_load_all(self.files[name]):
                if doc:
                    out.append(doc)
        return out


def render(
    values: Mapping[str, Any] | None = None,
    *,
    chart: Path = CHART,
    release: str = "gpu-portal",
    namespace: str = "gpu-portal",
    is_upgrade: bool = False,
) -> Rendered:
    """``helm template RELEASE CHART -n NAMESPACE -f <values>``, as objects and text."""
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    defaults = yaml.safe_load((chart / "values.yaml").read_text()) or {}
    merged = as_float64(merge_values(defaults, dict(values or {})))
    top = {
        "Values": merged,
        "Release": {
            "Name": release,
            "Namespace": namespace,
            "Service": "Helm",
            "IsInstall": not is_upgrade,
            "IsUpgrade": is_upgrade,
            "Revision": 2 if is_upgrade else 1,
        },
        "Chart": {
            "Name": meta["name"],
            "Version": meta["version"],
            "AppVersion": meta.get("appVersion", ""),
            "Description": meta.get("description", ""),
        },
        "Capabilities": {"KubeVersion": {"Version": "v1.34.0", "Major": "1", "Minor": "34"}},
    }
    defines: dict[str, list] = {}
    parsed: dict[str, list] = {}
    for path in sorted((chart / "templates").rglob("*")):
        if path.is_file():
            rel = str(path.relative_to(chart.parent))
            parsed[rel] = parse(lex(path.read_text(), rel), defines)
    renderer = Renderer(defines)
    files: dict[str, str] = {}
    notes = ""
    for rel, nodes in parsed.items():
        base = Path(rel).name
        if base.startswith("_"):
            continue
        scope = {**top, "Template": {"Name": rel, "BasePath": f"{meta['name']}/templates"}}
        text = renderer.render(nodes, scope, {"$": scope})
        if base == "NOTES.txt":
            notes = text
        else:
            files[rel] = text
    return Rendered(files, notes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render the gpu-portal chart like `helm template` (a subset).")
    parser.add_argument("-f", "--values", action="append", default=[], help="a values file (repeatable)")
    parser.add_argument("--set-file", action="append", default=[], metavar="KEY=PATH", help="a value read from a file")
    parser.add_argument("--name", default="gpu-portal")
    parser.add_argument("--namespace", "-n", default="gpu-portal")
    args = parser.parse_args(argv)
    values: dict[str, Any] = {}
    for path in args.values:
        values = merge_values(values, yaml.safe_load(Path(path).read_text()) or {})
    for item in args.set_file:
        key, _, path = item.partition("=")
        node = values
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = Path(path).read_text()
    try:
        rendered = render(values, release=args.name, namespace=args.namespace)
    except TemplateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name, text in sorted(rendered.files.items()):
        if text.strip():
            sys.stdout.write(f"---\n# Source: {name}\n{text.strip()}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
