"""Loads the offerings of a cluster profile into the catalog."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from portal.cluster_profile import ClusterProfile
from portal.models import Offering


@dataclass
class CatalogChanges:
    created: list[str]
    updated: list[str]
    deactivated: list[str]


@transaction.atomic
def sync_catalog(profile: ClusterProfile) -> CatalogChanges:
    """Make the catalog match the profile; offerings it no longer names are deactivated.

    Deactivating rather than deleting keeps the history of workloads that used them.
    A price an admin set by hand survives a reload.
    """
    changes = CatalogChanges([], [], [])
    existing = {o.slug: o for o in Offering.objects.select_for_update()}
    for slug, spec in profile.offerings.items():
        share = spec.share
        values = {
            "kind": spec.kind,
            "gpu_model": spec.gpu_model.key if spec.gpu_model else "",
            "mig_profile": spec.mig_profile,
            "pool": spec.pool.name,
            "request_mode": spec.request_mode,
            "resource_name": spec.resource_name,
            "dra_device_class": spec.dra_device_class,
            "dra_selector": spec.dra_selector,
            "node_selector": spec.node_selector,
            "node_affinity": spec.node_affinity,
            "tolerations": spec.tolerations,
            "share_numerator": share.numerator,
            "share_denominator": share.denominator if share else 1,
            "gpu_memory_gib": spec.memory_gib,
            "is_active": True,
        }
        row = existing.pop(slug, None)
        if row is None:
            Offering.objects.create(
                slug=slug, display_name=spec.display_name, price_per_hour=spec.price_per_hour, **values
            )
            changes.created.append(slug)
            continue
        if not row.price_set_by_admin:
            values["price_per_hour"] = spec.price_per_hour
        dirty = [k for k, v in values.items() if getattr(row, k) != v]
        if dirty:
            for key in dirty:
                setattr(row, key, values[key])
            row.save(update_fields=dirty)
            changes.updated.append(slug)
    for row in existing.values():
        if row.is_active:
            row.is_active = False
            row.save(update_fields=["is_active"])
            changes.deactivated.append(row.slug)
    return changes
