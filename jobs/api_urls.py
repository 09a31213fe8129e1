from rest_framework.routers import SimpleRouter

from jobs.api import WorkloadViewSet

router = SimpleRouter(trailing_slash=True)
router.register("workloads", WorkloadViewSet, basename="workload")
urlpatterns = router.urls
