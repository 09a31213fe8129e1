"""Security tests, generated from the URL configuration wherever possible.

- test_tenant_isolation.py: every route x method x caller x object against the access
  table (policy.py); leaks of another team's data; no 5xx, NUL characters included.
- test_role_fields.py: fields a role may not set (team, state, admission, priority,
  charge, prices, quotas, decisions, staff) are refused or ignored; safe redirects.
- test_csrf.py: every unsafe route refuses a session without the CSRF token; Bearer
  tokens need none; the htmx token from the page works.
- test_headers.py: CSP, X-Frame-Options and nosniff on every page; no inline code.
- test_openapi_fuzz.py: Schemathesis against /api/schema/ (no 5xx, documented codes,
  bodies match).

Public routes, decided in policy.py: login, logout, the SSO endpoints (404 while SSO is
off), /healthz and /readyz, /metrics (PORTAL_METRICS_TOKEN protects it; closed in
production without one), /api/schema/ and /api/docs/ (the description holds no data).
Left out of the walk: Django's admin (its own staff login and permissions).
"""
