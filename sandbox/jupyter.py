"""Where Jupyter in a notebook container serves, for the kubelet's readiness probes.

A Notebook's URL is ``/notebook/<namespace>/<name>/`` (``NB_PREFIX``); it answers only
when Jupyter serves under that prefix. The sandbox models the images it is given:

- Kubeflow's notebook-server images, started as built (no command, no args), serve
  under ``$NB_PREFIX`` (their init passes ``--ServerApp.base_url=${NB_PREFIX}``);
- anything started with ``--ServerApp.base_url=X`` (or ``--NotebookApp.base_url``) in its
  command or args serves under X, with ``$(VAR)`` expanded from the container's env as
  Kubernetes does;
- everything else serves at ``/`` (a docker-stacks image's own start does).

An HTTP readiness probe of a notebook container passes when its path is Jupyter's
``<base>/api`` (answered without a token) and fails with a 404 otherwise, as the real
server would. Only pods of notebooks (label ``notebook-name``) are judged this way.
"""

from __future__ import annotations

import re
from typing import Any

KUBEFLOW_IMAGES = (
    "ghcr.io/kubeflow/kubeflow/notebook-servers/",
    "docker.io/kubeflownotebookswg/",
    "kubeflownotebookswg/",
    "public.ecr.aws/j1r0q0g6/notebooks/notebook-servers/",
)
BASE_URL_FLAGS = ("--ServerApp.base_url", "--NotebookApp.base_url")
NOTEBOOK_LABEL = "notebook-name"
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def _expand(value: str, env: dict[str, str]) -> str:
    """``$(NAME)`` from the env, as the kubelet expands command and args; unknown names stay."""
    return _VAR.sub(lambda m: env.get(m.group(1), m.group(0)), value)


def _normal(path: str) -> str:
    return "/" + path.strip("/") if path.strip("/") else "/"


def served_base_url(container: dict[str, Any]) -> str:
    env = {e["name"]: str(e.get("value", "")) for e in container.get("env") or [] if e.get("name")}
    argv = [str(w) for w in (*(container.get("command") or []), *(container.get("args") or []))]
    if not argv:
        image = str(container.get("image", ""))
        return _normal(env.get("NB_PREFIX", "/")) if image.startswith(KUBEFLOW_IMAGES) else "/"
    for i, word in enumerate(argv):
        for flag in BASE_URL_FLAGS:
            if word.startswith(flag + "="):
                return _normal(_expand(word[len(flag) + 1 :], env))
            if word == flag and i + 1 < len(argv):
                return _normal(_expand(argv[i + 1], env))
    return "/"


def readiness_failure(pod: dict[str, Any], container: dict[str, Any]) -> str:
    """The readiness probe's failure for a notebook container, or "" when it passes (or is not modelled)."""
    if NOTEBOOK_LABEL not in (pod["metadata"].get("labels") or {}):
        return ""
    probe = (container.get("readinessProbe") or {}).get("httpGet")
    if not probe:
        return ""
    path = _normal(str(probe.get("path") or "/"))
    base = served_base_url(container)
    if path == _normal(base.rstrip("/") + "/api"):
        return ""
    return "HTTP probe failed with statuscode: 404"
