"""The image and the development compose file, checked without a container engine.

There is no Docker or podman here, so these read the files the way the engines would and
run the one build step that can go wrong in Python (collectstatic under production
settings) exactly as the Containerfile runs it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from tests.conftest import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Containerfile, continuation lines joined, comments dropped."""
    text = (DEPLOY / "Containerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_the_image_builds_from_python_3_11_slim():
    assert instructions()[0] == ("FROM", "python:3.11-slim")


def test_the_image_runs_as_the_non_root_user_the_chart_expects():
    users = [args for word, args in instructions() if word == "USER"]
    assert users, "no USER: the image would run as root"
    uid, _, gid = users[-1].partition(":")
    # Numeric, so the kubelet can check runAsNonRoot against the image itself.
    assert uid.isdigit() and int(uid) != 0
    assert gid.isdigit() and int(gid) != 0
    helpers = (DEPLOY / "helm" / "gpu-portal" / "templates" / "_helpers.tpl").read_text()
    assert f"runAsUser: {uid}" in helpers
    # Nothing after USER may need root.
    last_user = max(i for i, (word, _) in enumerate(instructions()) if word == "USER")
    assert not [w for w, _ in instructions()[last_user:] if w == "RUN"]


def test_the_image_installs_the_requirements_and_starts_gunicorn():
    runs = [args for word, args in instructions() if word == "RUN"]
    assert any("pip install -r requirements.txt" in run for run in runs)
    copies = [args for word, args in instructions() if word == "COPY"]
    assert copies[0] == "requirements.txt ./", "requirements first, so code edits keep the pip layer cached"
    cmd = [args for word, args in instructions() if word == "CMD"][-1]
    assert yaml.safe_load(cmd)[:2] == ["gunicorn", "portal.wsgi"]
    env = " ".join(args for word, args in instructions() if word == "ENV")
    assert "PORTAL_ENV=production" in env and "PYTHONDONTWRITEBYTECODE=1" in env


def collectstatic_step() -> tuple[dict[str, str], list[str]]:
    """The environment assignments and the command of the Containerfile's collectstatic RUN."""
    run = next(args for word, args in instructions() if word == "RUN" and "collectstatic" in args)
    words = shlex.split(run.split("&&")[0])
    env = dict(word.split("=", 1) for word in words if re.match(r"^[A-Z_]+=", word))
    command = [word for word in words if not re.match(r"^[A-Z_]+=", word)]
    return env, command


def test_the_build_time_collectstatic_works_under_production_settings(tmp_path: Path):
    env, command = collectstatic_step()
    assert command == ["python", "manage.py", "collectstatic", "--noinput"]
    env = {**env, "PORTAL_ENV": "production", "STATIC_ROOT": str(tmp_path / "static"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, *command[1:]], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    manifest = tmp_path / "static" / "staticfiles.json"
    assert manifest.exists(), "the hashed, compressed files whitenoise serves in production"
    assert list((tmp_path / "static").rglob("*.css.gz"))


def test_the_build_context_leaves_out_the_local_environment():
    ignored = (DEPLOY / "Containerfile.dockerignore").read_text().split()
    assert {".git", ".venv", "var", "staticfiles"} <= set(ignored)
    assert "sandbox" not in ignored, "compose runs the sandbox cluster from the image"


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def test_compose_has_the_services_of_the_development_stack():
    services = compose()["services"]
    assert {"web", "worker", "beat", "db", "redis", "sandbox"} <= set(services)
    assert services["db"]["image"].startswith("postgres:")
    assert services["redis"]["image"].startswith("redis:")
    assert services["sandbox"]["command"][:4] == ["python", "-m", "sandbox", "serve"]
    assert services["worker"]["command"][:3] == ["celery", "--app=portal", "worker"]
    assert services["beat"]["command"][:3] == ["celery", "--app=portal", "beat"]


def test_compose_builds_the_image_from_the_repository_with_the_containerfile():
    for name, service in compose()["services"].items():
        if "build" in service:
            context = (DEPLOY / service["build"]["context"]).resolve()
            assert context == REPO_ROOT, name
            assert (context / service["build"]["dockerfile"]).is_file(), name


def test_compose_points_the_portal_at_its_own_database_redis_and_sandbox():
    services = compose()["services"]
    for name in ("web", "worker", "beat", "migrate"):
        env = services[name]["environment"]
        assert env["PORTAL_ENV"] == "development", name
        assert urlsplit(env["DATABASE_URL"]).hostname in services, name
        assert urlsplit(env["REDIS_URL"]).hostname in services, name
        assert env["PORTAL_KUBECONFIG"] in services["sandbox"]["command"], name
        assert services[name]["network_mode"] == "service:sandbox", name
    for dependency in ("migrate", "redis", "sandbox"):
        assert dependency in services["web"]["depends_on"]


def test_compose_publishes_nothing_beyond_this_machine_and_nothing_privileged():
    for name, service in compose()["services"].items():
        assert not service.get("privileged"), name
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)


def test_the_sandbox_accepts_the_arguments_compose_gives_it():
    from sandbox.__main__ import _parser

    command = compose()["services"]["sandbox"]["command"]
    assert command[:3] == ["python", "-m", "sandbox"]
    args = _parser().parse_args(command[3:])
    assert args.host == "127.0.0.1"  # reachable from web, worker and beat: they share its network namespace
    assert args.kubeconfig == compose()["services"]["web"]["environment"]["PORTAL_KUBECONFIG"]
