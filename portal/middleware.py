from __future__ import annotations

from django.http import HttpResponseBadRequest, JsonResponse

from portal.jsonbody import depth_over_limit, is_json, too_deep_message

# Every asset is served by the portal itself, so 'self' is enough; no unsafe-eval.
# htmx needs no eval; its indicator styles are disabled in base.html.
CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        # The API docs page (Swagger UI) needs inline bootstrapping; it gets its own policy.
        if request.path.startswith("/api/docs/"):
            response.setdefault(
                "Content-Security-Policy",
                "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
                "img-src 'self' data:; frame-ancestors 'none'",
            )
        else:
            response.setdefault("Content-Security-Policy", CSP)
        return response


# How a NUL character arrives: raw (a decoded path), percent-encoded (query strings, forms), escaped (JSON).
NUL_SPELLINGS = (b"\x00", b"%00", b"\\u0000")
NUL_REFUSED = "The request contains a NUL character (0x00), which no field accepts."


class RefuseNulCharacters:
    """400 for a request whose path, query string or body holds a NUL character.

    PostgreSQL cannot store or even compare text containing NUL, so such input made every
    view that filters or saves it crash (500): ``?team=%00`` on a list, a token name, a
    team slug in the URL. Nothing the portal takes may contain one, so it is refused here,
    once, before any view. The price: a JSON string with the literal text ``\\u0000``
    is refused too.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        parts = [request.path_info.encode(), request.META.get("QUERY_STRING", "").encode()]
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            parts.append(request.body)
        if any(nul in part for part in parts for nul in NUL_SPELLINGS):
            if request.path_info.startswith("/api/"):
                return JsonResponse({"detail": NUL_REFUSED}, status=400)
            return HttpResponseBadRequest(NUL_REFUSED, content_type="text/plain")
        return self.get_response(request)


class RefuseDeepJson:
    """400 for a JSON body nested deeper than ``portal.jsonbody.MAX_DEPTH``, for every caller.

    Refused here, before authentication, so that an anonymous caller and a signed-in one
    get the same answer and no view, authentication class or parser ever recurses into
    such a body (DRF's parser has the same check for views reached another way).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method not in ("GET", "HEAD", "OPTIONS") and is_json(request.META.get("CONTENT_TYPE", "")):
            depth = depth_over_limit(request.body)
            if depth:
                message = too_deep_message(depth)
                if request.path_info.startswith("/api/"):
                    return JsonResponse({"detail": message}, status=400)
                return HttpResponseBadRequest(message, content_type="text/plain")
        return self.get_response(request)
