"""Start-up checks of the jobs settings (Django's system check framework).

The notebook images offered in the form's picker must be images users may run: an
entry outside the allowed registries would be offered and then refused at submit.
"""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, register

from jobs.specs import parse_image, registry_allowed


@register()
def notebook_images(app_configs=None, **kwargs) -> list[Error]:
    errors = []
    if not settings.NOTEBOOK_IMAGES:
        errors.append(Error("PORTAL_NOTEBOOK_IMAGES is empty: the notebook form needs a default image", id="jobs.E001"))
    for value in settings.NOTEBOOK_IMAGES:
        try:
            image = parse_image(value)
        except ValueError as exc:
            errors.append(Error(f"PORTAL_NOTEBOOK_IMAGES: {value!r} {exc}", id="jobs.E002"))
            continue
        if not registry_allowed(image, settings.ALLOWED_IMAGE_REGISTRIES):
            errors.append(
                Error(
                    f"PORTAL_NOTEBOOK_IMAGES: {value!r} is not from an allowed registry",
                    hint="add its registry to PORTAL_ALLOWED_REGISTRIES or remove the image",
                    id="jobs.E003",
                )
            )
    return errors
