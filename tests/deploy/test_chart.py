"""The Helm chart: valid Kubernetes 1.34 objects, restricted pods, and settings the portal accepts.

Rendered by deploy/render_chart.py (no helm binary here; see deploy/README.md) with
MINIMAL (values.yaml plus the settings it cannot default) and PRODUCTION (TLS, Secrets
of the operator's own, SSO, more replicas) from tests/deploy/chart.py.
"""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from deploy.render_chart import TemplateError, render
from tests.deploy.chart import (
    HOST,
    KUBERNETES_VERSION,
    MINIMAL,
    PRODUCTION,
    SECRET_KEY,
    containers,
    documents,
    env_of,
    find,
    pod_templates,
)
from tests.manifests.pss import assert_restricted
from tests.test_shell import run_manage

VARIANTS = {"minimal": MINIMAL, "production": PRODUCTION}


@pytest.fixture(params=sorted(VARIANTS), scope="module")
def docs(request) -> list[dict]:
    return documents(VARIANTS[request.param])


def test_kubernetes_validate_knows_the_target_version():
    assert KUBERNETES_VERSION in kubernetes_validate.utils.all_versions()


def test_every_object_is_valid_for_kubernetes_1_34_in_strict_mode(docs):
    problems = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path) or "<root>"
            problems.append(f"{doc['kind']} {doc['metadata']['name']}: {where}: {exc.message}")
    assert not problems, "\n".join(problems)


def test_the_chart_installs_the_expected_objects():
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in documents(MINIMAL))
    assert kinds == [
        ("ClusterRole", "gpu-portal-gpu-portal"),
        ("ClusterRoleBinding", "gpu-portal-gpu-portal"),
        ("ConfigMap", "gpu-portal-profile"),
        ("Deployment", "gpu-portal-beat"),
        ("Deployment", "gpu-portal-web"),
        ("Deployment", "gpu-portal-worker"),
        ("Ingress", "gpu-portal"),
        ("Job", "gpu-portal-migrate"),
        ("PodDisruptionBudget", "gpu-portal-web"),
        ("Secret", "gpu-portal"),
        ("Service", "gpu-portal"),
        ("ServiceAccount", "gpu-portal"),
    ]


@pytest.mark.parametrize(
    ("unset", "message"),
    [
        (("ingress", "host"), "ingress.host is required"),
        (("clusterProfile",), "clusterProfile is required"),
        (("externalDatabase", "url"), "externalDatabase.url or externalDatabase.existingSecret is required"),
        (("externalRedis", "url"), "externalRedis.url or externalRedis.existingSecret is required"),
        (("secretKey", "value"), "secretKey.value or secretKey.existingSecret is required"),
    ],
)
def test_a_missing_required_setting_stops_rendering_with_its_name(unset, message):
    values = copy.deepcopy(MINIMAL)
    node = values
    for key in unset[:-1]:
        node = node[key]
    del node[unset[-1]]
    with pytest.raises(TemplateError, match=message):
        render(values)


def test_default_values_alone_name_what_is_missing():
    with pytest.raises(TemplateError, match="is required"):
        render({})


def test_every_pod_meets_the_restricted_pod_security_standard(docs):
    for name, template in pod_templates(docs).items():
        spec = template["spec"]
        assert_restricted(spec)
        for container in containers(spec):
            assert container["securityContext"]["readOnlyRootFilesystem"] is True, name
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            assert mounts["/tmp"] == "tmp", name
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert "emptyDir" in volumes["tmp"], name
        assert spec["securityContext"]["runAsUser"] == 10001


def test_every_process_runs_in_production_against_the_cluster_it_runs_in(docs):
    for name, template in pod_templates(docs).items():
        for container in containers(template["spec"]):
            env = env_of(container)
            assert env["PORTAL_ENV"] == "production", name
            assert env["PORTAL_KUBECONFIG"] == "in-cluster", name
            assert env["ALLOWED_HOSTS"] == HOST, name
            assert env["PORTAL_CLUSTER_PROFILE"] == "/etc/gpu-portal/cluster-profile.yaml", name
            assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"} <= set(env), name


def test_only_the_pods_that_talk_to_the_cluster_get_a_service_account_token(docs):
    tokens = {name: t["spec"]["automountServiceAccountToken"] for name, t in pod_templates(docs).items()}
    assert tokens == {
        "gpu-portal-web": True,
        "gpu-portal-worker": True,
        "gpu-portal-beat": False,
        "gpu-portal-migrate": False,
    }
    assert find(docs, "ServiceAccount")["automountServiceAccountToken"] is False


def test_the_web_runs_gunicorn_with_probes_that_pass_the_host_and_https_checks(docs):
    web = find(docs, "Deployment", "-web")["spec"]["template"]["spec"]["containers"][0]
    assert web["command"][:2] == ["gunicorn", "portal.wsgi"]
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz?skip=cluster"
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in (web["readinessProbe"], web["livenessProbe"]):
        headers = {h["name"]: h["value"] for h in probe["httpGet"]["httpHeaders"]}
        assert headers == {"Host": HOST, "X-Forwarded-Proto": "https"}
        assert probe["httpGet"]["port"] == "http"
    assert {"name": "http", "containerPort": 8000, "protocol": "TCP"} in web["ports"]


def test_the_probes_reach_the_views_through_production_settings(settings, client, db):
    """What the kubelet sends, through the production security settings, gets the probe's answer."""
    settings.ALLOWED_HOSTS = [HOST]
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert client.get("/healthz", HTTP_HOST=HOST, HTTP_X_FORWARDED_PROTO="https").status_code == 200
    assert client.get("/healthz", HTTP_HOST=HOST).status_code == 301  # without the header
    assert client.get("/healthz", HTTP_HOST="10.1.2.3:8000", HTTP_X_FORWARDED_PROTO="https").status_code == 400


def test_the_worker_and_a_single_recreated_beat_run_celery(docs):
    worker = find(docs, "Deployment", "-worker")
    beat = find(docs, "Deployment", "-beat")
    assert worker["spec"]["template"]["spec"]["containers"][0]["command"][:3] == ["celery", "--app=portal", "worker"]
    assert worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > 300
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}
    command = beat["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:3] == ["celery", "--app=portal", "beat"]
    assert "--schedule=/tmp/celerybeat-schedule" in command


def test_migrations_run_as_a_hook_after_the_config_they_read_exists(docs):
    job = find(docs, "Job", "-migrate")
    hook = job["metadata"]["annotations"]
    assert hook["helm.sh/hook"] == "pre-install,pre-upgrade"
    spec = job["spec"]["template"]["spec"]
    assert [c["command"] for c in containers(spec)] == [
        ["python", "manage.py", "migrate", "--noinput"],
        ["python", "manage.py", "load_catalog"],
    ]
    assert spec["restartPolicy"] == "Never"
    assert "serviceAccountName" not in spec  # the chart's account is not a hook: it may not exist yet
    for kind in ("ConfigMap", "Secret"):
        for doc in (d for d in docs if d["kind"] == kind):
            annotations = doc["metadata"]["annotations"]
            assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
            assert int(annotations["helm.sh/hook-weight"]) < int(hook["helm.sh/hook-weight"])


def test_each_deployment_selects_its_own_pods_only(docs):
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    for deployment in deployments:
        selector = deployment["spec"]["selector"]["matchLabels"]
        for other in deployments:
            labels = other["spec"]["template"]["metadata"]["labels"]
            selected = all(labels.get(k) == v for k, v in selector.items())
            assert selected == (other is deployment), (deployment["metadata"]["name"], other["metadata"]["name"])


def test_the_service_and_ingress_route_to_the_web_pods(docs):
    service = find(docs, "Service")
    web_labels = find(docs, "Deployment", "-web")["spec"]["template"]["metadata"]["labels"]
    assert all(web_labels.get(k) == v for k, v in service["spec"]["selector"].items())
    rule = find(docs, "Ingress")["spec"]["rules"][0]
    assert rule["host"] == HOST
    backend = rule["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": service["metadata"]["name"], "port": {"name": "http"}}


def test_the_production_variant_uses_tls_and_the_operators_secrets_only():
    docs = documents(PRODUCTION)
    assert not [d for d in docs if d["kind"] == "Secret"]
    ingress = find(docs, "Ingress")
    assert ingress["spec"]["tls"] == [{"hosts": [HOST], "secretName": "gpu-portal-tls"}]
    assert ingress["spec"]["ingressClassName"] == "nginx"
    env = env_of(find(docs, "Deployment", "-web")["spec"]["template"]["spec"]["containers"][0])
    assert env["DATABASE_URL"] == {"secretKeyRef": {"name": "portal-db-app", "key": "uri"}}
    assert env["REDIS_URL"] == {"secretKeyRef": {"name": "portal-env", "key": "REDIS_URL"}}
    assert env["OIDC_CLIENT_SECRET"] == {"secretKeyRef": {"name": "portal-oidc", "key": "OIDC_CLIENT_SECRET"}}
    assert env["PORTAL_ALLOWED_REGISTRIES"] == "nvcr.io,registry.example.com/ml"
    image = find(docs, "Deployment", "-web")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == "registry.example.com/ml/gpu-portal:1.4.2"


def test_changing_the_cluster_profile_rolls_the_pods():
    before = find(documents(MINIMAL), "Deployment", "-web")["spec"]["template"]["metadata"]["annotations"]
    after = find(
        documents({**MINIMAL, "clusterProfile": MINIMAL["clusterProfile"] + "\n# edited\n"}), "Deployment", "-web"
    )
    assert (
        after["spec"]["template"]["metadata"]["annotations"]["checksum/cluster-profile"]
        != (before["checksum/cluster-profile"])
    )


def test_a_single_web_replica_gets_no_disruption_budget():
    values = {**MINIMAL, "web": {"replicas": 1}}
    assert not [d for d in documents(values) if d["kind"] == "PodDisruptionBudget"]


def test_the_release_name_shapes_every_name():
    docs = documents(MINIMAL, release="ml", namespace="platform")
    assert find(docs, "Deployment", "-web")["metadata"]["name"] == "ml-gpu-portal-web"
    binding = find(docs, "ClusterRoleBinding")
    assert binding["metadata"]["name"] == "platform-ml-gpu-portal"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "ml-gpu-portal", "namespace": "platform"}]
    assert binding["roleRef"]["name"] == find(docs, "ClusterRole")["metadata"]["name"]


def resolved_env(docs: list[dict], secrets: dict[str, str]) -> dict[str, str]:
    """The web container's environment as the kubelet would give it, Secrets filled in."""
    env = {}
    container = find(docs, "Deployment", "-web")["spec"]["template"]["spec"]["containers"][0]
    for item in container["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = secrets[f"{ref['name']}/{ref['key']}"]
    return env


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_portal_starts_with_the_environment_the_chart_gives_it(variant):
    """`manage.py check --deploy` accepts the settings each variant produces (errors only:
    the API schema's warnings belong to the apps, not to the deployment)."""
    secrets = {
        "gpu-portal/DATABASE_URL": MINIMAL["externalDatabase"]["url"],
        "gpu-portal/REDIS_URL": MINIMAL["externalRedis"]["url"],
        "gpu-portal/SECRET_KEY": SECRET_KEY,
        "portal-db-app/uri": "postgres://portal:x@pg-rw.db.svc:5432/app",
        "portal-env/REDIS_URL": "redis://redis.cache.svc:6379/0",
        "portal-env/SECRET_KEY": SECRET_KEY,
        "portal-oidc/OIDC_CLIENT_SECRET": "oidc-client-secret",
    }
    env = resolved_env(documents(VARIANTS[variant]), secrets)
    result = run_manage("check", "--deploy", env={**env, "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr + result.stdout
