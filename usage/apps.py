from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "usage"
    verbose_name = "GPU usage and spend"

    def ready(self) -> None:
        from usage import signals  # noqa: F401  (connects the receivers)
