"""The chart's ClusterRole grants exactly what the cluster client uses, derived from the code.

Each test names the change that would make it fail: a kind added to jobs/kube/kinds.py,
a new HTTP method, subresource or public method in jobs/kube/client.py, a hand edit of
the generated template, or a rule broader than the code needs.
"""

from __future__ import annotations

import pytest

from deploy import rbac
from jobs.kube.kinds import KINDS, KindInfo, Need
from tests.deploy.chart import MINIMAL, documents, find


def rendered_grants() -> set[tuple[str, str, str]]:
    """Grants on every object of a resource (rules without resourceNames)."""
    role = find(documents(MINIMAL), "ClusterRole")
    out = set()
    for rule in role["rules"]:
        if "resourceNames" in rule:
            continue
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule
        out.update((g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"])
    return out


def rendered_named_grants() -> set[tuple[str, str, str, str]]:
    role = find(documents(MINIMAL), "ClusterRole")
    out = set()
    for rule in role["rules"]:
        if "resourceNames" not in rule:
            continue
        assert set(rule) == {"apiGroups", "resources", "resourceNames", "verbs"}, rule
        assert rule["resourceNames"], "an empty resourceNames list grants every object"
        out.update(
            (g, r, v, n)
            for g in rule["apiGroups"]
            for r in rule["resources"]
            for v in rule["verbs"]
            for n in rule["resourceNames"]
        )
    return out


def test_the_committed_cluster_role_is_the_one_derived_from_the_code():
    assert rbac.TEMPLATE.read_text() == rbac.template_text(), "stale: run python -m deploy.rbac --write"


def test_the_rendered_cluster_role_grants_exactly_the_derived_permissions():
    assert rendered_grants() == rbac.grants()
    assert rendered_named_grants() == rbac.named_grants()


def test_add_on_configuration_is_readable_by_name_only():
    from jobs.kube.kinds import CONFIG_OBJECTS

    named = rendered_named_grants()
    for entry in CONFIG_OBJECTS:
        for name in entry.names:
            assert (entry.info.group, entry.info.plural, "get", name) in named
    assert {v for _, _, v, _ in named} == {"get"}
    config_resources = {(e.info.group, e.info.plural) for e in CONFIG_OBJECTS}
    assert not {(g, r) for g, r, _ in rendered_grants()} & config_resources, "no unnamed grant on them"


def test_every_kind_in_the_table_can_be_read_and_every_kind_the_builders_make_can_be_applied():
    granted = rendered_grants()
    built = rbac.built_kinds()
    for info in KINDS:
        for verb in ("get", "list", "watch"):
            assert (info.group, info.plural, verb) in granted, (info.kind, verb)
        if (info.api_version, info.kind) in built:
            # Server-side apply: a PATCH, authorised as create too when the object is new.
            assert {(info.group, info.plural, "patch"), (info.group, info.plural, "create")} <= granted, info.kind
            assert ((info.group, info.plural, "delete") in granted) == info.namespaced, info.kind
        else:
            assert not {v for g, r, v in granted if (g, r) == (info.group, info.plural)} - {"get", "list", "watch"}
    assert ("", "pods/log", "get") in granted


def test_the_client_sends_only_http_methods_the_derivation_knows():
    methods = rbac.client_http_methods()
    assert methods, "found no requests in jobs/kube/client.py: has its request function been renamed?"
    assert methods <= set(rbac.HTTP_METHODS), f"classify {methods - set(rbac.HTTP_METHODS)} in deploy/rbac.py"


def test_every_public_method_of_the_client_is_classified():
    assert rbac.client_public_methods() == set(rbac.CLIENT_METHODS), (
        "a Cluster method was added or removed: classify it in deploy/rbac.py CLIENT_METHODS"
    )


def test_every_path_suffix_the_client_appends_is_a_granted_subresource():
    unknown = rbac.client_path_literals() - rbac.SUBRESOURCES - rbac.NON_RESOURCE_PATHS
    assert not unknown, f"classify {unknown} in deploy/rbac.py"
    granted = {r for _, r, _ in rendered_grants()}
    for suffix in rbac.SUBRESOURCES:
        assert any(r.endswith(suffix) for r in granted), suffix


def test_the_role_grants_nothing_dangerous():
    granted = rendered_grants()
    assert not {g for g in granted if "*" in g}, "no wildcards"
    assert not {g for g in rendered_named_grants() if "*" in g}, "no wildcards"
    resources = {r for _, r, _ in granted}
    assert not resources & {"secrets", "configmaps", "nodes/proxy", "pods/exec", "pods/attach", "pods/portforward"}
    assert not {(g, r) for g, r, _ in granted if g == "rbac.authorization.k8s.io"}
    assert not {v for _, _, v in granted} & {"escalate", "bind", "impersonate", "deletecollection", "update"}
    # Pods are made by the workload controllers, never by the portal; namespaces are never deleted.
    assert not {v for g, r, v in granted if (g, r) == ("", "pods")} - {"get", "list", "watch"}
    assert ("", "namespaces", "delete") not in granted


def test_a_kind_added_to_the_table_makes_the_committed_role_stale(monkeypatch):
    import jobs.kube.kinds

    extra = KindInfo("batch/v1", "CronJob", "cronjobs", True, Need.BUILTIN)
    monkeypatch.setattr(jobs.kube.kinds, "KINDS", (*KINDS, extra))
    assert ("batch", "cronjobs", "list") in rbac.grants()
    assert rbac.template_text() != rbac.TEMPLATE.read_text()


def test_a_new_http_method_in_the_client_is_noticed(tmp_path):
    source = tmp_path / "client.py"
    source.write_text(
        "class Cluster:\n"
        "    def replace(self, path, body):\n"
        "        return self._json('PUT', path, body=body)\n"
        "    def status(self, path):\n"
        "        return self._send('GET', path + '/status')\n"
    )
    assert rbac.client_http_methods(source) - set(rbac.HTTP_METHODS) == {"PUT"}
    assert rbac.client_path_literals(source) - rbac.SUBRESOURCES == {"/status"}


def test_a_method_given_as_a_variable_is_refused_rather_than_guessed(tmp_path):
    source = tmp_path / "client.py"
    source.write_text("def f(self, verb):\n    return self._json(verb.upper(), '/x')\n")
    with pytest.raises(ValueError, match="not a literal"):
        rbac.client_http_methods(source)
