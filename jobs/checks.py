"""Start-up checks of the jobs settings (Django's system check framework), and what they admit.

The notebook images offered in the form's picker must be images users may run: an
image outside the allowed registries would be offered and then refused at submit. A list
the operator gave (PORTAL_NOTEBOOK_IMAGES) must be right as a whole, or the portal does not
start; of the built-in default list, only the images the allowed registries admit are
offered, so narrowing PORTAL_ALLOWED_REGISTRIES alone never stops the portal.
"""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Warning, register

from jobs.specs import parse_image, registry_allowed


def _allowed(value: str) -> bool:
    try:
        return registry_allowed(parse_image(value), settings.ALLOWED_IMAGE_REGISTRIES)
    except ValueError:
        return False


def notebook_images() -> list[str]:
    """The images of the notebook form's picker, the default first."""
    return [image for image in settings.NOTEBOOK_IMAGES if _allowed(image)]


@register()
def notebook_images_check(app_configs=None, **kwargs) -> list[Error | Warning]:
    if not settings.NOTEBOOK_IMAGES_GIVEN:
        if notebook_images():
            return []
        return [
            Warning(
                "no default notebook image is from an allowed registry: the notebook form starts empty",
                hint="set PORTAL_NOTEBOOK_IMAGES to images from PORTAL_ALLOWED_REGISTRIES",
                id="jobs.W001",
            )
        ]
    errors: list[Error | Warning] = []
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
