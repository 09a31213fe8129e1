"""The REST API's shared parts: pagination and the error format."""

from __future__ import annotations

from rest_framework import pagination
from rest_framework.views import exception_handler as drf_exception_handler


class Pagination(pagination.PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


def exception_handler(exc, context):
    """DRF's handler, with every error body carrying a ``detail`` line.

    Validation errors keep DRF's shape (field → messages) so clients can show them
    next to the field, plus a one-line summary.
    """
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(response.data, dict) and "detail" not in response.data:
        fields = ", ".join(str(k) for k in response.data)
        response.data = {"detail": f"Invalid input: {fields}.", **response.data}
    elif isinstance(response.data, list):
        response.data = {"detail": " ".join(str(m) for m in response.data)}
    return response
