"""The portal's ClusterRole, derived from the code that talks to Kubernetes.

``python -m deploy.rbac --write`` regenerates ``deploy/helm/gpu-portal/templates/clusterrole.yaml``;
``--check`` exits 1 when the file is stale. tests/deploy/test_rbac.py fails in the same
case, and when the client starts using an HTTP method, a subresource or a public method
this module has not classified, so a new kind or verb cannot reach production without
its permission (or with more than it needs).

How the rules are derived:

1. **Kinds**: every row of ``jobs/kube/kinds.py``. The client refuses any other kind, so
   nothing outside the table can ever be requested.
2. **Which kinds are written**: the kinds of the objects the pure builders in
   ``jobs/kube/manifests.py`` and ``quotas/kueue.py`` (the Kueue queues a Kueue cluster
   gets instead of Volcano's) return (every dict literal there with an ``apiVersion`` and
   a ``kind``). The client's writes only ever send what those builders made (apply,
   merge patch of the same objects, delete of the same objects); Pods, Events, Nodes,
   Kueue's Workloads and the like are only read.
3. **Verbs per client method** (``CLIENT_METHODS`` below, each checked against the
   client's source):

   - ``apply``/``apply_all``: server-side apply is a PATCH, authorised as ``patch``, and
     when the object does not exist yet the API server creates it and authorises that
     as ``create`` too. ``merge_patch``: ``patch``. Both re-read with ``get`` on a 409.
   - ``delete``: ``delete`` (re-read with ``get`` on a 409), for written kinds that are
     namespaced: the portal deletes what belongs to a workload, inside a team namespace.
     Cluster-scoped objects it creates (namespaces, queues, priority classes, training
     runtimes) outlive every workload; not being able to delete a team's namespace
     (and with it the team's volumes) is a guard worth having.
   - ``get``/``require``: ``get``; ``list``: ``list``; ``watch``: ``watch`` - for every kind.
   - ``pods_for``: ``list`` pods; ``events_for``: ``list`` events; ``pod_logs``:
     ``get`` on the ``pods/log`` subresource.
   - ``read_config``: ``get`` on the add-on configuration objects ``cluster_check`` reads
     (``CONFIG_OBJECTS`` in ``jobs/kube/kinds.py``), **by name** (``resourceNames``): the
     client refuses any other name, and a role that could read every ConfigMap or
     DaemonSet in the cluster would be far broader than a preflight needs.
   - ``check``: ``/version`` and the discovery documents, which every authenticated
     user may read through Kubernetes' default ``system:discovery`` and
     ``system:public-info-viewer`` bindings; nothing to grant.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
CLIENT_SOURCE = REPO / "jobs" / "kube" / "client.py"
MANIFESTS_SOURCE = REPO / "jobs" / "kube" / "manifests.py"
KUEUE_SOURCE = REPO / "quotas" / "kueue.py"
# Every module whose dict literals are objects the client applies: (source, module name).
BUILDER_SOURCES = ((MANIFESTS_SOURCE, "jobs.kube.manifests"), (KUEUE_SOURCE, "quotas.kueue"))
TEMPLATE = REPO / "deploy" / "helm" / "gpu-portal" / "templates" / "clusterrole.yaml"

VERB_ORDER = ("get", "list", "watch", "create", "patch", "delete")
READ, WRITTEN, DELETABLE, PODS, EVENTS, NOTHING = "all kinds", "written", "deletable", "pods", "events", "nothing"
CONFIG = "configuration objects, by name"


@dataclass(frozen=True)
class Use:
    """What one public method of ``jobs.kube.client.Cluster`` asks of the API server."""

    verbs: tuple[str, ...]
    kinds: str
    subresource: str = ""


CLIENT_METHODS: dict[str, Use] = {
    "apply": Use(("create", "patch", "get"), WRITTEN),
    "apply_all": Use(("create", "patch", "get"), WRITTEN),
    "merge_patch": Use(("patch", "get"), WRITTEN),
    "delete": Use(("delete", "get"), DELETABLE),
    "get": Use(("get",), READ),
    "require": Use(("get",), READ),
    "list": Use(("list",), READ),
    "watch": Use(("watch",), READ),
    "pods_for": Use(("list",), PODS),
    "events_for": Use(("list",), EVENTS),
    "pod_logs": Use(("get",), PODS, "log"),
    "read_config": Use(("get",), CONFIG),
    "check": Use((), NOTHING),
    "ping": Use((), NOTHING),
    # No request of their own.
    "from_settings": Use((), NOTHING),
    "url": Use((), NOTHING),
    "close": Use((), NOTHING),
}
# HTTP methods the client may send, and the verbs they are authorised as (a PATCH that
# creates is authorised as create as well, see above).
HTTP_METHODS = {"GET": ("get", "list", "watch"), "PATCH": ("patch", "create"), "DELETE": ("delete",)}
# Paths appended to an object path: the subresources the client reads.
SUBRESOURCES = {"/log"}
# Non-resource paths the client reads, covered by Kubernetes' default bindings.
NON_RESOURCE_PATHS = {"/version"}


@dataclass(frozen=True)
class Kind:
    group: str
    plural: str
    namespaced: bool
    api_version: str
    kind: str


def table_kinds() -> list[Kind]:
    from jobs.kube.kinds import KINDS

    return [Kind(k.group, k.plural, k.namespaced, k.api_version, k.kind) for k in KINDS]


def built_kinds(sources: Iterable[tuple[Path, str]] = BUILDER_SOURCES) -> set[tuple[str, str]]:
    """(apiVersion, kind) of every object literal in the builders' modules.

    A value may be a string or a module-level name (``NOTEBOOK_API``), resolved by
    importing the module: the builders are pure, so importing them does nothing else.
    """
    found: set[tuple[str, str]] = set()
    for source, module in sources:
        namespace = vars(importlib.import_module(module))
        for node in ast.walk(ast.parse(source.read_text())):
            if not isinstance(node, ast.Dict):
                continue
            fields = {k.value: v for k, v in zip(node.keys, node.values, strict=True) if isinstance(k, ast.Constant)}
            if "apiVersion" in fields and "kind" in fields:
                found.add((_resolve(fields["apiVersion"], namespace), _resolve(fields["kind"], namespace)))
    return found


def _resolve(node: ast.expr, namespace: dict) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name) and isinstance(namespace.get(node.id), str):
        return namespace[node.id]
    raise ValueError(f"cannot resolve {ast.unparse(node)} at line {node.lineno} of the builders to a string")


def unlisted_built_kinds() -> set[tuple[str, str]]:
    """Kinds the builders make that the kinds table lacks (the client would refuse to send them)."""
    listed = {(k.api_version, k.kind) for k in table_kinds()}
    return built_kinds() - listed


def grants() -> set[tuple[str, str, str]]:
    """Every (apiGroup, resource, verb) the portal needs."""
    kinds = table_kinds()
    written = built_kinds()
    by_use = {
        READ: kinds,
        WRITTEN: [k for k in kinds if (k.api_version, k.kind) in written],
        DELETABLE: [k for k in kinds if (k.api_version, k.kind) in written and k.namespaced],
        PODS: [k for k in kinds if (k.group, k.plural) == ("", "pods")],
        EVENTS: [k for k in kinds if (k.group, k.plural) == ("", "events")],
        NOTHING: [],
        CONFIG: [],  # granted by name only: named_grants()
    }
    out: set[tuple[str, str, str]] = set()
    for use in CLIENT_METHODS.values():
        for kind in by_use[use.kinds]:
            resource = f"{kind.plural}/{use.subresource}" if use.subresource else kind.plural
            out.update((kind.group, resource, verb) for verb in use.verbs)
    return out


def named_grants() -> set[tuple[str, str, str, str]]:
    """Every (apiGroup, resource, verb, resourceName) the portal needs on objects it reads by name."""
    from jobs.kube.kinds import CONFIG_OBJECTS

    out: set[tuple[str, str, str, str]] = set()
    for use in CLIENT_METHODS.values():
        if use.kinds != CONFIG:
            continue
        for entry in CONFIG_OBJECTS:
            out.update((entry.info.group, entry.info.plural, verb, name) for verb in use.verbs for name in entry.names)
    return out


def named_rules(granted: Iterable[tuple[str, str, str, str]] | None = None) -> list[dict]:
    """The by-name grants as PolicyRules: one rule per resource and set of verbs, names sorted."""
    names_of: dict[tuple[str, str, tuple[str, ...]], set[str]] = {}
    verbs_of: dict[tuple[str, str, str], set[str]] = {}
    for group, resource, verb, name in named_grants() if granted is None else granted:
        verbs_of.setdefault((group, resource, name), set()).add(verb)
    for (group, resource, name), verbs in verbs_of.items():
        ordered = tuple(v for v in VERB_ORDER if v in verbs) + tuple(sorted(verbs - set(VERB_ORDER)))
        names_of.setdefault((group, resource, ordered), set()).add(name)
    return [
        {"apiGroups": [group], "resources": [resource], "resourceNames": sorted(names), "verbs": list(verbs)}
        for (group, resource, verbs), names in sorted(names_of.items())
    ]


def rules(granted: Iterable[tuple[str, str, str]] | None = None) -> list[dict]:
    """The grants as PolicyRules: one rule per API group and set of verbs, sorted."""
    verbs_of: dict[tuple[str, str], set[str]] = {}
    for group, resource, verb in grants() if granted is None else granted:
        verbs_of.setdefault((group, resource), set()).add(verb)
    grouped: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for (group, resource), verbs in verbs_of.items():
        ordered = tuple(v for v in VERB_ORDER if v in verbs) + tuple(sorted(verbs - set(VERB_ORDER)))
        grouped.setdefault((group, ordered), []).append(resource)
    return [
        {"apiGroups": [group], "resources": sorted(resources), "verbs": list(verbs)}
        for (group, verbs), resources in sorted(grouped.items(), key=lambda item: (item[0][0], -len(item[0][1])))
    ]


def template_text() -> str:
    body = yaml.safe_dump({"rules": rules() + named_rules()}, sort_keys=False, default_flow_style=None, width=200)
    return (
        "{{- /*\n"
        "Generated by `python -m deploy.rbac --write` from jobs/kube/kinds.py, jobs/kube/client.py,\n"
        "jobs/kube/manifests.py and quotas/kueue.py; do not edit by hand (tests/deploy/test_rbac.py fails\n"
        "when it is stale).\n"
        "*/}}\n"
        "{{- if .Values.rbac.create }}\n"
        "apiVersion: rbac.authorization.k8s.io/v1\n"
        "kind: ClusterRole\n"
        "metadata:\n"
        '  name: {{ include "gpu-portal.clusterName" . }}\n'
        "  labels:\n"
        '    {{- include "gpu-portal.labels" . | nindent 4 }}\n'
        f"{body}"
        "{{- end }}\n"
    )


# -- what the client's source says it does (used by the tests) -------------------------


def client_http_methods(source: Path = CLIENT_SOURCE) -> set[str]:
    """The HTTP methods passed to the client's one request function (``_send`` / ``_json``)."""
    methods = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("_send", "_json"):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                methods.add(first.value)
            elif not (isinstance(first, ast.Name) and first.id == "method"):
                raise ValueError(f"line {node.lineno}: the HTTP method is not a literal: {ast.unparse(node)}")
    return methods


def client_path_literals(source: Path = CLIENT_SOURCE) -> set[str]:
    """String literals that start with "/": subresources appended to paths, and non-resource paths."""
    return {
        node.value
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("/")
    }


def client_public_methods() -> set[str]:
    from jobs.kube.client import Cluster

    return {name for name, _ in inspect.getmembers(Cluster) if not name.startswith("_")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help=f"write {TEMPLATE.relative_to(REPO)}")
    action.add_argument("--check", action="store_true", help="exit 1 when the chart's ClusterRole is stale")
    args = parser.parse_args(argv)
    import django

    django.setup()
    text = template_text()
    for api_version, kind in sorted(unlisted_built_kinds()):
        print(f"warning: the builders make {kind} ({api_version}), not in jobs/kube/kinds.py", file=sys.stderr)
    if args.write:
        TEMPLATE.write_text(text)
        print(f"wrote {TEMPLATE.relative_to(REPO)}")
    elif args.check:
        if TEMPLATE.read_text() != text:
            print(f"{TEMPLATE.relative_to(REPO)} is stale: run python -m deploy.rbac --write", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
