"""Login forms: Django's, with failed logins limited (portal/login_throttle.py)."""

from __future__ import annotations

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError
from django.views.decorators.debug import sensitive_variables

from portal import login_throttle

THROTTLED = "throttled"


class ThrottledLoginMixin:
    """Counts each username-and-password attempt before checking it; over a budget, refuses it unchecked.

    ``refusal`` is set when an attempt was refused, so the view can answer 429 with Retry-After.
    """

    refusal: login_throttle.Refusal | None = None

    @sensitive_variables("password")
    def clean(self):
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if username is None or not password:
            return super().clean()  # a missing field: the field's own error, no attempt made
        self.refusal = login_throttle.attempt(self.request, username)
        if self.refusal is not None:
            raise ValidationError(self.refusal.message, code=THROTTLED)
        cleaned = super().clean()  # raises on a wrong password: the attempt stays counted
        login_throttle.succeeded(self.request, username)
        return cleaned


class LoginForm(ThrottledLoginMixin, AuthenticationForm):
    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "Your username and password didn't match. Please try again.",
    }


class AdminLoginForm(ThrottledLoginMixin, AdminAuthenticationForm):
    """The Django admin's login page, with the same budgets: it checks the same passwords."""
