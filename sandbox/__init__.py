"""The sandbox cluster: an emulated Kubernetes API server with simulated GPU nodes.

THIS IS A SIMULATOR FOR DEVELOPMENT AND TESTS, NEVER FOR PRODUCTION. It keeps every
object in memory, trusts a single bearer token, has no TLS, no RBAC and no real
containers. It exists so that the portal, its worker and the test suite can talk to
"a cluster" through kubeconfig and the official ``kubernetes`` client exactly as they
would talk to a real one, on a laptop or in CI.

What it emulates:
- the Kubernetes REST API well enough for the official Python client (typed APIs,
  CustomObjectsApi, DynamicClient, watch.Watch, server-side apply), with discovery,
  resourceVersions, watches, selectors, pagination, the status subresource, owner
  garbage collection, Status errors and optional CRD schema validation;
- nodes built from a cluster profile (``portal.cluster_profile``) with GPU Feature
  Discovery labels, taints, extended resources, MIG slices, time-sliced GPUs and DRA
  devices, and a scheduler that places pods on them (bin-packing, gang scheduling,
  Volcano queue capability, DRA claims);
- controllers that play Kubeflow Notebook, Kubeflow Trainer (TrainJob), JobSet, KServe
  (InferenceService) and Volcano (Job, PodGroup, Queue), plus ResourceQuota; with a
  profile that says ``queueing: kueue``, a minimal Kueue too (Workloads, quota admission
  in a cohort, resuming suspended jobs and ungating pods);
- a DCGM-exporter-style ``/metrics`` endpoint whose numbers are a deterministic
  function of the seed, the device and the simulated clock.

Nothing in ``portal/``, ``jobs/`` or ``quotas/`` imports this package: they reach the
sandbox only over the Kubernetes API. The sandbox imports no Django; from the portal
it reads only the pure modules ``portal.cluster_profile`` and ``portal.gpus``.

Entry points: ``python -m sandbox serve`` (see ``sandbox/__main__.py``) and
``sandbox.testing.running_sandbox`` for tests.

How a request flows through the modules:

    server.py (HTTP, auth, discovery, watch streams, /sandbox/v1 control, /metrics)
      -> faults.py (injected failures) -> api.py (verbs: create/get/list/update/patch/apply/delete)
           -> validation.py, schemas.py (CRDs), cel.py (DRA selectors), apply.py (managedFields),
              patches.py, selectors.py, podsecurity.py + controllers/quotas.py (admission),
              controllers/inference.py webhook + knative.py (KServe's and Knative's validating webhooks)
           -> store.py (objects, resourceVersions, the event log watches read, persistence)
    cluster.py (wiring, clock.py, the controller loop) -> controllers/ (one module per upstream
      controller) -> scheduler.py (placement, devices from world.py) -> controllers/kubelet.py
    metrics.py and logs.py read the same store.

Knobs a manifest can carry (sandbox-only, ignored by real clusters):
``sandbox.local/duration-seconds`` (how long a TrainJob, Volcano Job or bare pod
runs once all its pods run; default 600), ``sandbox.local/outcome: Failed`` (end
failed instead of succeeded) and ``sandbox.local/activity`` (pin a pod's GPU
activity, 0..1). On a workload they are copied to its pods.
"""
