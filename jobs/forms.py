"""The workload request form: HTML input in, the request mapping ``jobs.specs`` takes out.

The form decides nothing about what is acceptable: its fields follow
``FIELDS_BY_KIND`` and are almost all optional at this level, so every rule (required
fields, ranges, the GPU count of an offering, forbidden environment variables ...) is
checked once, by ``lifecycle.validate``/``request_workload``, and its messages are put
back next to the field they name. What the form does own is the translation of text
boxes into structures:

* command and args: one text box each, split into words the way a POSIX shell would
  (quotes group words, line breaks count as spaces); no shell ever runs it. The spec
  does the split, so its message explains a stray quote.
* env, labels, annotations: one ``KEY=VALUE`` per line; blank lines and lines starting
  with ``#`` are skipped. Env is sent as a list of name/value pairs so that the spec can
  report a variable given twice.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django import forms
from django.core.exceptions import PermissionDenied

from jobs import lifecycle, presets
from jobs.checks import notebook_images
from jobs.models import Kind, Workload
from jobs.specs import (
    DEFAULT_RESOURCES,
    FIELDS_BY_KIND,
    FRAMEWORKS,
    MAX_NAME_LENGTH,
    MODEL_FORMATS,
    NON_FIELD_ERRORS,
    SpecError,
)
from portal.models import Offering, Team
from portal.units import unit_noun
from quotas.admission import QuotaRefused
from quotas.usage import units_left

# Request fields the form never shows: the kind comes from the URL, a new notebook
# always starts running ("stopped" is how the portal keeps a stopped notebook's spec), and a
# canary is a rollout over a running endpoint (its page), never part of a new request.
HIDDEN_FIELDS = ("kind", "stopped", "canary_traffic_percent")
TEXT_MAPS = ("env", "labels", "annotations")
# Page layout only: what each kind's form shows first, and what it folds away.
LEADING_FIELDS = {
    "notebook": ("image", "gpus_per_replica", "workspace_gib"),
    "training": ("framework", "image", "replicas", "gpus_per_replica", "max_runtime_seconds"),
    "endpoint": ("model_format", "storage_uri", "image", "min_replicas", "max_replicas", "gpus_per_replica"),
}
ADVANCED = ("cpu", "memory", "labels", "annotations")
ARGV_FIELDS = ("command", "args")


def _text(label: str, help_text: str = "", placeholder: str = "", **attrs) -> forms.CharField:
    widget_attrs = {"placeholder": placeholder, **attrs} if placeholder else attrs
    return forms.CharField(
        label=label, required=False, help_text=help_text, strip=True, widget=forms.TextInput(attrs=widget_attrs)
    )


def _lines(label: str, help_text: str, placeholder: str) -> forms.CharField:
    attrs = {"rows": 3, "spellcheck": "false", **({"placeholder": placeholder} if placeholder else {})}
    return forms.CharField(
        label=label, required=False, help_text=help_text, strip=False, widget=forms.Textarea(attrs=attrs)
    )


def _number(label: str, help_text: str = "", placeholder: str = "") -> forms.IntegerField:
    attrs = {"placeholder": placeholder, "inputmode": "numeric"} if placeholder else {"inputmode": "numeric"}
    return forms.IntegerField(label=label, required=False, help_text=help_text, widget=forms.NumberInput(attrs=attrs))


# Examples in empty fields, per kind: a notebook's fields must not suggest a training run.
PLACEHOLDERS: dict[str, dict[str, str]] = {
    "notebook": {"image": "", "command": "", "args": "", "env": "HF_HOME=/home/jovyan/.cache"},
    "training": {
        "image": "nvcr.io/nvidia/pytorch:24.10-py3",
        "command": "torchrun train.py",
        "args": '--epochs 3 --run-name "first try"',
        "env": "HF_HOME=/home/jovyan/.cache\nWANDB_MODE=offline",
    },
    "endpoint": {
        "image": "nvcr.io/nvidia/tritonserver:24.10-py3",
        "command": "python -m my_model_server",
        "args": "--port 8080",
        "env": "MODEL_NAME=sentiment",
    },
}
NOTEBOOK_COMMAND_HELP = (
    " Empty: the image starts Jupyter. Kubeflow's notebook images serve it under the notebook's "
    "URL prefix; for other Jupyter images the portal adds the base URL arguments."
)
IMAGE_LIST_ID = "notebook-images"


def _field(name: str, kind: str) -> forms.Field:
    cpu, memory = DEFAULT_RESOURCES[kind]
    example = PLACEHOLDERS[kind]
    argv_help = (
        'Split into words like a shell would: quote a word that contains spaces ("a b"); '
        "line breaks count as spaces. No shell runs it."
    )
    factories = {
        "name": lambda: _text(
            "Name",
            f"Lowercase letters, digits and '-', starting with a letter; at most {MAX_NAME_LENGTH} characters. "
            "Unique among your team's live workloads.",
            "explore-resnet",
            maxlength=MAX_NAME_LENGTH,
            autocomplete="off",
        ),
        # Rendered as the offering picker (radio table), not by the widget.
        "offering": lambda: forms.CharField(label="Offering", required=False),
        "gpus_per_replica": lambda: _number(
            "GPUs per replica",
            "Full GPUs: 1 to 8. A MIG slice or a shared GPU: 1. CPU only: 0. Empty means 1 (0 for CPU).",
            "1",
        ),
        "image": lambda: (
            _text(
                "Image",
                "Pick one of the platform's notebook images, or type another from an allowed registry "
                "with a tag or digest.",
                spellcheck="false",
                list=IMAGE_LIST_ID,
                autocomplete="off",
            )
            if kind == Kind.NOTEBOOK
            else _text(
                "Image",
                "From an allowed registry, with a tag or digest, e.g. " + example["image"] + ".",
                example["image"],
                spellcheck="false",
            )
        ),
        "command": lambda: _lines(
            "Command",
            argv_help + (NOTEBOOK_COMMAND_HELP if kind == Kind.NOTEBOOK else " Empty: the image's entrypoint."),
            example["command"],
        ),
        "args": lambda: _lines("Arguments", argv_help, example["args"]),
        "env": lambda: _lines("Environment variables", "One KEY=VALUE per line.", example["env"]),
        "labels": lambda: _lines("Labels", "One key=value per line.", "project=resnet"),
        "annotations": lambda: _lines("Annotations", "One key=value per line.", "example.com/owner=alice"),
        "cpu": lambda: _text("CPU per replica", f"Cores, e.g. 500m or 4. Empty means {cpu}.", cpu),
        "memory": lambda: _text("Memory per replica", f"e.g. 512Mi or 16Gi. Empty means {memory}.", memory),
        "workspace_gib": lambda: _number(
            "Workspace (GiB)", "A persistent home volume kept while the notebook is stopped. Empty: none.", "20"
        ),
        "framework": lambda: forms.ChoiceField(
            label="Framework",
            required=False,
            initial="torch",
            choices=[(f, {"torch": "PyTorch", "mpi": "MPI", "custom": "Custom"}[f]) for f in FRAMEWORKS],
        ),
        "replicas": lambda: _number("Nodes", "Replicas of the training run, 1 to 16.", "1"),
        "max_runtime_seconds": lambda: _number(
            "Maximum runtime (seconds)",
            "Stopped after this long: 3600 = 1 hour, 86400 = 1 day (60 s to 30 days). Empty: no limit.",
            "14400",
        ),
        "min_replicas": lambda: _number("Minimum replicas", "0 scales to zero when idle.", "1"),
        "max_replicas": lambda: _number("Maximum replicas", "At most 10; quota is charged for the maximum.", "1"),
        "model_format": lambda: forms.ChoiceField(
            label="Model format",
            required=False,
            choices=[("", "None: run my own server image"), *((f, f) for f in MODEL_FORMATS)],
            help_text="Serve a model with KServe's runtime for this format, or leave empty and give an image.",
        ),
        "storage_uri": lambda: _text(
            "Model location", "s3://, gs://, pvc://, hf:// or https:// URI of the model.", "s3://models/sentiment/v3"
        ),
    }
    return factories[name]()


def request_fields(kind: str) -> list[str]:
    return [f for f in FIELDS_BY_KIND[kind] if f not in HIDDEN_FIELDS]


def parse_pairs(text: str, *, as_list: bool) -> list[dict[str, str]] | dict[str, str]:
    """``KEY=VALUE`` lines into a mapping (or name/value list); ``ValidationError`` names the line."""
    pairs: list[tuple[str, str]] = []
    problems = []
    for number, line in enumerate((text or "").splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        if not sep or not key.strip():
            problems.append(f"line {number}: write KEY=VALUE (got {stripped[:40]!r})")
            continue
        pairs.append((key.strip(), value.strip()))
    if problems:
        raise forms.ValidationError(problems)
    if as_list:
        return [{"name": k, "value": v} for k, v in pairs]
    seen: dict[str, str] = {}
    for key, value in pairs:
        if key in seen:
            problems.append(f"{key} is given twice")
        seen[key] = value
    if problems:
        raise forms.ValidationError(problems)
    return seen


def format_pairs(value: Any) -> str:
    if isinstance(value, Mapping):
        return "\n".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list):
        return "\n".join(f"{item.get('name')}={item.get('value', '')}" for item in value if isinstance(item, Mapping))
    return str(value or "")


def initial_from_request(data: Mapping) -> dict:
    """Form initial values from a request mapping (a preset, or a workload's request)."""
    initial: dict[str, Any] = {}
    for key, value in data.items():
        if key in ARGV_FIELDS and isinstance(value, list | tuple):
            initial[key] = shlex.join(value)
        elif key in TEXT_MAPS:
            initial[key] = format_pairs(value)
        else:
            initial[key] = value
    return initial


class WorkloadRequestForm(forms.Form):
    team = forms.ModelChoiceField(
        queryset=Team.objects.none(), to_field_name="slug", empty_label=None, label="Team", required=True
    )
    wants_exception = forms.BooleanField(
        required=False,
        label="Ask for an exception if this is over quota",
        help_text="Instead of being refused, the request waits for a platform admin to approve it.",
    )
    exception_reason = forms.CharField(
        required=False,
        label="Why the exception is needed",
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "Conference deadline on Friday; needs 2 more GPUs."}),
    )
    preset_name = forms.CharField(
        required=False,
        max_length=presets.MAX_PRESET_NAME,
        label="Preset name",
        help_text="Team admins: save these fields (without the workload name) for the team to start from.",
    )

    def __init__(self, kind: str, user, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kind = kind
        self.user = user
        # The teams where the user may create workloads (portal.access.can_use_team).
        self.fields["team"].queryset = Team.objects.visible_to(user)
        self.spec_fields = request_fields(kind)
        for name in self.spec_fields:
            self.fields[name] = _field(name, kind)
        self.order_fields(["team", *self.spec_fields])
        self.image_choices = notebook_images() if kind == Kind.NOTEBOOK else []
        if self.image_choices:
            # A new notebook starts from the platform's default image (a preset or a
            # "request again" brings its own in the form's initial data, which wins).
            self.fields["image"].initial = self.image_choices[0]

    @property
    def error_summary(self) -> list[tuple[str, str, str]]:
        """(label, anchor, message) of every error, in page order, for the list above the form.

        Problems that belong to no field have no label and no anchor. The offering is a
        radio table, so its anchor is the picker.
        """
        items = [("", "", str(message)) for message in self.non_field_errors()]
        for field in self:
            anchor = "offering-picker" if field.name == "offering" else field.auto_id
            items.extend((str(field.label), anchor, str(message)) for message in field.errors)
        return items

    @property
    def detail_fields(self) -> list[forms.BoundField]:
        """The request fields of the main grid, the ones that matter most for the kind first.

        Name and offering have places of their own; ``ADVANCED`` fields go in a fold.
        """
        first = [f for f in LEADING_FIELDS[self.kind] if f in self.spec_fields]
        rest = [f for f in self.spec_fields if f not in (*first, "name", "offering", *ADVANCED)]
        return [self[name] for name in (*first, *rest)]

    @property
    def advanced_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in ADVANCED if name in self.spec_fields]

    @property
    def advanced_open(self) -> bool:
        """Unfold the advanced fields when one of them is filled in or has an error."""
        return any(field.errors or field.value() for field in self.advanced_fields)

    # -- cleaning: only the text-to-structure translation -------------------------------

    def clean_env(self):
        return parse_pairs(self.cleaned_data.get("env", ""), as_list=True)

    def clean_labels(self):
        return parse_pairs(self.cleaned_data.get("labels", ""), as_list=False)

    def clean_annotations(self):
        return parse_pairs(self.cleaned_data.get("annotations", ""), as_list=False)

    def request_data(self) -> dict:
        """The request mapping for ``jobs.specs``: the kind plus every field the user filled in."""
        data: dict[str, Any] = {"kind": self.kind}
        for name in self.spec_fields:
            value = self.cleaned_data.get(name)
            if value is None or value == "" or value == [] or value == {}:
                continue
            data[name] = value
        return data

    @property
    def team_obj(self) -> Team | None:
        return self.cleaned_data.get("team") if hasattr(self, "cleaned_data") else None

    # -- the three things the page does with it ------------------------------------------

    def submit(self) -> Workload | None:
        """Request the workload; None with the errors on the form when it was refused."""
        if not self._valid():
            return None
        try:
            return lifecycle.request_workload(
                self.user,
                self.cleaned_data["team"],
                self.request_data(),
                wants_exception=self.cleaned_data["wants_exception"],
                reason=self.cleaned_data["exception_reason"],
            )
        except SpecError as exc:
            self.add_spec_errors(exc.errors)
        except QuotaRefused as exc:
            self.add_error(None, str(exc))
        return None

    def preview(self) -> list[dict] | None:
        """The objects the request would become; None with the errors on the form. Creates nothing."""
        from jobs.kube.manifests import workload_objects

        if not self._valid():
            return None
        try:
            spec = lifecycle.validate(self.request_data(), self.cleaned_data["team"])
        except SpecError as exc:
            self.add_spec_errors(exc.errors)
            return None
        return workload_objects(spec)

    def save_preset(self):
        """Store the fields as the team's preset; None with the errors on the form."""
        if not self._valid():
            return None
        team = self.cleaned_data["team"]
        try:
            return presets.save_preset(self.user, team, self.cleaned_data["preset_name"], self.request_data())
        except PermissionDenied:
            self.add_error(None, f"Only a team admin of {team.slug} can save presets.")
        except SpecError as exc:
            self.add_spec_errors(exc.errors)
        return None

    def _valid(self) -> bool:
        """``is_valid``; when a text box could not be read, the other fields are still checked.

        So one submit shows every problem, not the KEY=VALUE typo first and the rest later.
        """
        if self.is_valid():
            return True
        team = self.cleaned_data.get("team")
        if team is not None:
            try:
                lifecycle.validate(self.request_data(), team)
            except SpecError as exc:
                self.add_spec_errors({k: v for k, v in exc.errors.items() if k not in self.errors})
        return False

    def add_spec_errors(self, errors: Mapping[str, list[str]]) -> None:
        """Put each spec message next to its field; anything else above the form, with its key."""
        for key, messages in errors.items():
            if key in (*self.spec_fields, "preset_name"):
                self.add_error(key, list(messages))
            elif key == NON_FIELD_ERRORS:
                self.add_error(None, list(messages))
            else:
                self.add_error(None, [f"{key}: {m}" for m in messages])


# -- what the page shows beside the form --------------------------------------------------


@dataclass(frozen=True)
class OfferingRow:
    offering: Offering
    left: int | None  # units the team's quota still admits; None for CPU only

    @property
    def capacity_known(self) -> bool:
        return self.offering.total_units is not None and self.offering.capacity_observed_at is not None


def offering_rows(team: Team | None) -> list[OfferingRow]:
    offerings = Offering.objects.filter(is_active=True).order_by("kind", "slug")
    return [OfferingRow(o, units_left(team, o) if team else None) for o in offerings]


@dataclass(frozen=True)
class CostEstimate:
    units: int
    price_per_unit: Decimal
    hours: Decimal | None
    noun: str = "units"  # the offering's unit for this count: "slice", "GPUs" (portal.units)
    # Endpoints: units at min replicas. ``units`` is at max replicas, what quota reserves;
    # spend charges the replicas that run, from min_replicas up (usage.spend).
    min_units: int | None = None

    @property
    def per_hour(self) -> Decimal:
        return self.price_per_unit * self.units

    @property
    def min_per_hour(self) -> Decimal | None:
        return None if self.min_units is None else self.price_per_unit * self.min_units

    @property
    def total(self) -> Decimal | None:
        return None if self.hours is None else self.per_hour * self.hours


def cost_estimate(kind: str, offering: Offering | None, data: Mapping) -> CostEstimate | None:
    """Price per hour × units (GPUs per replica × replicas, or max replicas of an endpoint, what
    quota reserves; an endpoint is charged for the replicas that run, so its rate at min
    replicas is given too).

    ``static/portal/workloads.js`` recomputes the same line as the user types; this one is
    the first render and the page without JavaScript. CPU offerings are priced per replica.
    """
    if offering is None:
        return None

    def number(key: str, default: int) -> int:
        try:
            value = int(data.get(key) or default)
        except (TypeError, ValueError):
            return default
        return max(value, 0)

    per_replica = number("gpus_per_replica", 1) if offering.is_gpu else 1
    min_units = None
    if kind == Kind.ENDPOINT:
        replicas = number("max_replicas", max(number("min_replicas", 1), 1))
        min_units = per_replica * min(number("min_replicas", 1), replicas)
    elif kind == Kind.TRAINING:
        replicas = number("replicas", 1)
    else:
        replicas = 1
    seconds = number("max_runtime_seconds", 0) if kind == Kind.TRAINING else 0
    hours = (Decimal(seconds) / 3600).quantize(Decimal("0.01")) if seconds else None
    count = per_replica * replicas
    return CostEstimate(count, offering.price_per_hour, hours, unit_noun(offering, count), min_units)
