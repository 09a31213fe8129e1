from __future__ import annotations

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
