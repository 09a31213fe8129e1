"""Browser forms of quotas. They only parse input; ``quotas.requests`` and
``quotas.approvals`` decide what it means (and report errors by field name, which
``show_errors`` puts next to the fields)."""

from __future__ import annotations

from django import forms

from quotas.compute import is_compute_class, unit
from quotas.requests import QuotaInputError, known_gpu_classes


def class_choices(classes: list[str]) -> list[tuple[str, str]]:
    """A GPU class as it is; ``cpu`` and ``memory`` with their unit, since the amounts are not GPUs."""
    return [(c, f"{c} ({unit(c)})" if is_compute_class(c) else c) for c in classes]


class QuotaRequestForm(forms.Form):
    team = forms.SlugField(widget=forms.HiddenInput)
    gpu_class = forms.ChoiceField(label="GPU class")
    guaranteed = forms.DecimalField(
        required=False,
        min_value=0,
        max_digits=10,
        decimal_places=4,
        label="New guaranteed",
        help_text="Empty: keep the current value.",
    )
    limit = forms.DecimalField(
        required=False,
        min_value=0,
        max_digits=10,
        decimal_places=4,
        label="New limit",
        help_text="Empty: keep the current value.",
    )
    until = forms.DateField(
        required=False,
        label="Until (optional)",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="A temporary grant lasts through this day; empty asks for a permanent change.",
    )
    justification = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), label="What are the GPUs for?")

    def __init__(self, *args, team=None, **kwargs):
        super().__init__(*args, **kwargs)
        classes = known_gpu_classes(team)
        self.fields["gpu_class"].choices = class_choices(classes)
        if team is not None:
            self.fields["team"].initial = team.slug
        # Unique ids per team: one page shows a form for each team the user manages.
        prefix = f"{team.slug}-" if team is not None else ""
        self.auto_id = f"id_{prefix}%s"

    def show_errors(self, exc: QuotaInputError) -> None:
        for name, messages in exc.errors.items():
            self.add_error(name if name in self.fields else None, messages)


class QuotaSetForm(forms.Form):
    """A platform admin sets a team's quota of one class directly (``quotas.requests.set_quota``)."""

    team = forms.ModelChoiceField(queryset=None, to_field_name="slug")
    gpu_class = forms.ChoiceField(label="GPU class")
    guaranteed = forms.DecimalField(min_value=0, max_digits=10, decimal_places=4)
    limit = forms.DecimalField(min_value=0, max_digits=10, decimal_places=4)
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args, **kwargs):
        from portal.models import Team

        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = Team.objects.order_by("slug")
        self.fields["gpu_class"].choices = class_choices(known_gpu_classes())
        self.auto_id = "id_set-%s"

    def show_errors(self, exc: QuotaInputError) -> None:
        for name, messages in exc.errors.items():
            self.add_error(name if name in self.fields else None, messages)


class DecisionForm(forms.Form):
    """Several ticked requests (``request``) and exceptions (``exception``), one comment."""

    comment = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("deny", "Deny")])

    def _ids(self, name: str) -> list[int]:
        ids = []
        for raw in self.data.getlist(name) if hasattr(self.data, "getlist") else []:
            try:
                ids.append(int(raw))
            except (TypeError, ValueError):
                self.add_error(None, f"{name} {raw!r} is not an id")
        return ids

    def clean(self):
        cleaned = super().clean()
        cleaned["request_ids"] = self._ids("request")
        cleaned["exception_ids"] = self._ids("exception")
        if not cleaned["request_ids"] and not cleaned["exception_ids"]:
            raise forms.ValidationError("Tick at least one request or exception.")
        return cleaned
