"""The API's description: the error answers every endpoint can give, documented once.

Its own module: DRF loads ``portal.api`` (pagination, errors) while it is itself being
imported, and drf-spectacular's AutoSchema imports DRF's generic views, so the two
cannot share a module without an import cycle.
"""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework import permissions, serializers


class ErrorSerializer(serializers.Serializer):
    """Every error body: a ``detail`` line, plus field -> messages for invalid input."""

    detail = serializers.CharField(help_text="What went wrong, in one line.")


UNSAFE = ("POST", "PUT", "PATCH", "DELETE")


class PortalAutoSchema(AutoSchema):
    """drf-spectacular's description, plus the errors DRF gives around any view's own code.

    Views document the answers they choose (a 409 for a conflict, a 403 for a role); these
    come from the framework, so no view would think of them: 401 without credentials,
    403 for a session caller without a CSRF token, 400 for a body that is not JSON or
    any input with a NUL character, 404
    for an id that names nothing (or a page past the end of a list), 429 over the rate
    limit. A view's own description of a code wins.
    """

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        # Any request may be refused for a NUL character (portal.middleware.RefuseNulCharacters).
        errors = {"400": "Invalid input: a field is named in the body; or a NUL character anywhere."}
        if not all(isinstance(p, permissions.AllowAny) for p in self.view.get_permissions()):
            errors["401"] = "No credentials, or an invalid or revoked API token."
        if self.method in UNSAFE:
            errors["403"] = "Not allowed for your role, or a session call without its CSRF token."
        if "{" in self.path or (self._is_list_view() and self._get_paginator()):
            errors["404"] = "No such object among those you may see (or no such page of the list)."
        if self.view.get_throttles():
            errors["429"] = "Over the rate limit; retry after the Retry-After header's seconds."
        for code, description in errors.items():
            if code not in responses:
                response = OpenApiResponse(ErrorSerializer, description=description)
                responses[code] = self._get_response_for_code(response, code, direction=direction)
        return responses
