"""Every route of the portal, read from the URL configuration, with the URLs to call it.

The security tests do not list endpoints by hand: ``all_routes()`` walks
``get_resolver().url_patterns``, so a new page or API route is tested as soon as it is
mounted. What cannot be derived is written down here, once per kind of thing:

- ``KWARG_OBJECTS``: which object fills a URL argument (``pk`` under ``workloads/`` is a
  workload). A route whose argument has no entry fails the tests with a message saying
  to add one.
- ``EXCLUDED_PREFIXES``: what the walk leaves out, and why.

Which methods a route accepts is read from the view: a DRF viewset's action map, an
APIView's or class-based view's handlers, or the method list that
``require_http_methods`` (``require_GET``, ``require_POST``) keeps in its closure. A
function view without such a decorator answers any method; it is tried with GET and POST.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.resolvers import RegexPattern, RoutePattern

HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
UNSAFE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
# Left out of the walk:
# - admin/: Django's admin, with its own staff-only login, CSRF and permissions (Django's tests).
# Static files are served by WhiteNoise as middleware, so they are not in the URLconf at all.
EXCLUDED_PREFIXES = ("admin/",)
API_PREFIX = "api/v1/"

# (route prefix from the site root, URL argument) -> the kind of object that fills it; the
# longest matching prefix wins. The objects of each kind are made by the ``world`` fixture
# (tests/security/conftest.py), one per owner (a team, or a user for API tokens).
KWARG_OBJECTS: dict[tuple[str, str], str] = {
    ("workloads/", "pk"): "workload",
    ("workloads/new/", "kind"): "workload_kind",
    ("api/v1/workloads/", "pk"): "workload",
    ("usage/workloads/", "pk"): "workload",
    ("presets/", "pk"): "preset",
    ("quotas/requests/", "pk"): "quota_request",
    ("api/v1/quota-requests/", "pk"): "quota_request",
    ("approvals/requests/", "pk"): "quota_request",
    ("approvals/exceptions/", "pk"): "quota_exception",
    ("api/v1/quota-exceptions/", "pk"): "quota_exception",
    ("profile/tokens/", "pk"): "token",
    ("api/v1/teams/", "slug"): "team",
    ("api/v1/offerings/", "slug"): "offering",
}

_ROUTE_ARG = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>\w+)>")
_REGEX_ARG = re.compile(r"\(\?P<(?P<name>\w+)>[^)]*\)")


@dataclass(frozen=True)
class Route:
    path: str  # from the site root, arguments as <name>, e.g. "api/v1/workloads/<pk>/"
    name: str
    callback: object
    methods: frozenset[str]  # the HTTP methods the view handles
    declared: bool  # False: a function view without a method decorator (it answers any method)

    @property
    def is_api(self) -> bool:
        return self.path.startswith(API_PREFIX)

    @property
    def key(self) -> str:
        """The name in the access table. Page and API routes share some names, so API ones get "api:"."""
        return f"api:{self.name}" if self.is_api else self.name

    @property
    def kwargs(self) -> list[str]:
        return re.findall(r"<(\w+)>", self.path)

    def raw_url(self, **values) -> str:
        return "/" + re.sub(r"<(\w+)>", lambda m: str(values[m[1]]), self.path)

    def url(self, **values) -> str:
        url = self.raw_url(**values)
        match = resolve(url)
        # The URL built must reach this very route, not a sibling that happens to match first.
        assert match.url_name == self.name and match.func == self.callback, f"{url} resolves to {match.url_name}"
        return url

    def __str__(self) -> str:
        return f"{self.key} /{self.path}"


def _pattern_text(pattern) -> str:
    """A URL pattern as plain text with arguments as <name>."""
    if isinstance(pattern, RoutePattern):
        return _ROUTE_ARG.sub(lambda m: f"<{m['name']}>", str(pattern))
    if isinstance(pattern, RegexPattern):
        text = _REGEX_ARG.sub(lambda m: f"<{m['name']}>", str(pattern))
        text = text.removeprefix("^").removesuffix("$").replace("\\.", ".")
        if re.search(r"[\\()\[\]^$*+?|]", text):
            raise AssertionError(f"cannot turn the regex route {pattern} into a URL; teach tests/security/routes.py")
        return text
    raise AssertionError(f"unknown kind of URL pattern {pattern!r}")


def view_methods(callback) -> tuple[frozenset[str], bool]:
    """(HTTP methods the view handles, whether the view declares them)."""
    actions = getattr(callback, "actions", None)
    if actions:  # a DRF viewset route (DRF adds "head" to this map on the first GET)
        return frozenset(m.upper() for m in actions if m.upper() in HTTP_METHODS), True
    cls = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if cls is not None:  # an APIView or a class-based view
        names = getattr(cls, "http_method_names", [])
        return frozenset(m.upper() for m in names if m.upper() in HTTP_METHODS and hasattr(cls, m)), True
    func = callback
    while func is not None:
        for cell in func.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if (
                isinstance(value, list | tuple)
                and value
                and all(isinstance(v, str) and v.upper() in (*HTTP_METHODS, "HEAD", "OPTIONS") for v in value)
            ):
                return frozenset(v.upper() for v in value if v.upper() in HTTP_METHODS), True
        func = getattr(func, "__wrapped__", None)
    return frozenset({"GET", "POST"}), False


def _walk(patterns, prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for entry in patterns:
        text = prefix + _pattern_text(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, text)
        else:
            yield text, entry


def all_routes() -> list[Route]:
    routes = []
    for path, pattern in _walk(get_resolver().url_patterns):
        if path.startswith(EXCLUDED_PREFIXES):
            continue
        assert pattern.name, f"/{path} has no URL name; name it so the access table can refer to it"
        methods, declared = view_methods(pattern.callback)
        routes.append(Route(path, pattern.name, pattern.callback, methods, declared))
    return routes


def object_kind(route: Route, kwarg: str) -> str | None:
    """The kind of object that fills ``kwarg`` of ``route``, or None when nobody said."""
    matches = [
        (len(prefix), kind)
        for (prefix, name), kind in KWARG_OBJECTS.items()
        if name == kwarg and route.path.startswith(prefix)
    ]
    return max(matches)[1] if matches else None


def missing_kwarg_mappings(routes: list[Route]) -> list[str]:
    return [
        f"{route}: no object for the URL argument '{kwarg}'; add (route prefix, '{kwarg}') to KWARG_OBJECTS "
        "in tests/security/routes.py and make one such object per team in the `world` fixture"
        for route in routes
        for kwarg in route.kwargs
        if object_kind(route, kwarg) is None
    ]
