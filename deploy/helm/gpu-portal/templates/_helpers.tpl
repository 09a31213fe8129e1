{{/*
Helpers. The chart keeps to the Go-template subset that deploy/render_chart.py renders
(see deploy/README.md), so the tests can render it where no helm binary exists.
*/}}

{{- define "gpu-portal.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpu-portal.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Cluster-scoped objects (ClusterRole, ClusterRoleBinding) carry the namespace too. */}}
{{- define "gpu-portal.clusterName" -}}
{{- printf "%s-%s" .Release.Namespace (include "gpu-portal.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpu-portal.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gpu-portal.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gpu-portal.host" -}}
{{- required "ingress.host is required: the portal's host name (also ALLOWED_HOSTS)" .Values.ingress.host -}}
{{- end -}}

{{- define "gpu-portal.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "gpu-portal.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpu-portal.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpu-portal.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | trunc 63 | trimSuffix "-" }}
{{ include "gpu-portal.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpu-portal
{{- end -}}

{{/* Does the chart create its own Secret (for at least one of the three values)? */}}
{{- define "gpu-portal.chartSecret" -}}
{{- if or (not .Values.externalDatabase.existingSecret) (not .Values.externalRedis.existingSecret) (not .Values.secretKey.existingSecret) -}}
true
{{- end -}}
{{- end -}}

{{/* Pods roll when the configuration they read from files or the chart's Secret changes. */}}
{{- define "gpu-portal.checksums" -}}
checksum/cluster-profile: {{ .Values.clusterProfile | sha256sum }}
checksum/secret: {{ printf "%s|%s|%s" .Values.externalDatabase.url .Values.externalRedis.url .Values.secretKey.value | sha256sum }}
{{- end -}}

{{/* The restricted Pod Security Standard, for every pod of the chart. */}}
{{- define "gpu-portal.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "gpu-portal.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "gpu-portal.volumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
- name: cluster-profile
  configMap:
    name: {{ include "gpu-portal.fullname" . }}-profile
{{- end -}}

{{- define "gpu-portal.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: cluster-profile
  mountPath: /etc/gpu-portal
  readOnly: true
{{- end -}}

{{- define "gpu-portal.scheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* One secret reference: the user's Secret when named, else the chart's. */}}
{{- define "gpu-portal.secretRef" -}}
secretKeyRef:
  {{- if .source.existingSecret }}
  name: {{ .source.existingSecret | quote }}
  key: {{ .source.existingSecretKey | quote }}
  {{- else }}
  name: {{ .fullname | quote }}
  key: {{ .key | quote }}
  {{- end }}
{{- end -}}

{{/* The environment every process of the portal reads its settings from. */}}
{{- define "gpu-portal.env" -}}
- name: PORTAL_ENV
  value: production
- name: PORTAL_KUBECONFIG
  value: in-cluster
- name: PORTAL_CLUSTER_PROFILE
  value: /etc/gpu-portal/cluster-profile.yaml
- name: ALLOWED_HOSTS
  value: {{ include "gpu-portal.host" . | quote }}
- name: CSRF_TRUSTED_ORIGINS
  value: {{ printf "https://%s" (include "gpu-portal.host" .) | quote }}
- name: DATABASE_URL
  valueFrom:
    {{- include "gpu-portal.secretRef" (dict "source" .Values.externalDatabase "fullname" (include "gpu-portal.fullname" .) "key" "DATABASE_URL") | nindent 4 }}
- name: REDIS_URL
  valueFrom:
    {{- include "gpu-portal.secretRef" (dict "source" .Values.externalRedis "fullname" (include "gpu-portal.fullname" .) "key" "REDIS_URL") | nindent 4 }}
- name: SECRET_KEY
  valueFrom:
    {{- include "gpu-portal.secretRef" (dict "source" .Values.secretKey "fullname" (include "gpu-portal.fullname" .) "key" "SECRET_KEY") | nindent 4 }}
- name: PORTAL_API_RATE
  value: {{ .Values.config.apiRate | quote }}
- name: PORTAL_ALLOWED_REGISTRIES
  value: {{ .Values.config.allowedRegistries | quote }}
- name: PORTAL_NOTEBOOK_URL_TEMPLATE
  value: {{ .Values.config.notebookUrlTemplate | quote }}
- name: PORTAL_TEAM_NAMESPACE_PREFIX
  value: {{ .Values.config.teamNamespacePrefix | quote }}
- name: PORTAL_BURST_BUDGET_CHECK
  value: {{ .Values.config.burstBudgetCheck | quote }}
- name: PORTAL_KUBE_TIMEOUT_SECONDS
  value: {{ .Values.config.kube.timeoutSeconds | quote }}
- name: PORTAL_KUBE_CONNECT_TIMEOUT
  value: {{ .Values.config.kube.connectTimeoutSeconds | quote }}
- name: PORTAL_KUBE_READ_TIMEOUT
  value: {{ .Values.config.kube.readTimeoutSeconds | quote }}
{{- if .Values.config.notebookImages }}
- name: PORTAL_NOTEBOOK_IMAGES
  value: {{ .Values.config.notebookImages | quote }}
{{- end }}
- name: PORTAL_RECONCILE_INTERVAL_SECONDS
  value: {{ .Values.config.reconcile.intervalSeconds | quote }}
- name: PORTAL_LOST_TASK_AFTER_SECONDS
  value: {{ .Values.config.reconcile.lostTaskAfterSeconds | quote }}
- name: PORTAL_FINISHED_RETENTION_SECONDS
  value: {{ .Values.config.reconcile.finishedRetentionSeconds | quote }}
- name: PORTAL_METRICS_SOURCE
  value: {{ .Values.config.metrics.source | quote }}
{{- if eq .Values.config.metrics.source "prometheus" }}
- name: PORTAL_PROMETHEUS_URL
  value: {{ required "config.metrics.prometheusUrl is required when config.metrics.source is prometheus" .Values.config.metrics.prometheusUrl | quote }}
{{- else }}
- name: PORTAL_PROMETHEUS_URL
  value: {{ .Values.config.metrics.prometheusUrl | quote }}
{{- end }}
- name: PORTAL_DCGM_URLS
  value: {{ .Values.config.metrics.dcgmUrls | quote }}
- name: PORTAL_PROMETHEUS_MATCHERS
  value: {{ .Values.config.metrics.prometheusMatchers | quote }}
- name: PORTAL_METRICS_WINDOW_SECONDS
  value: {{ .Values.config.metrics.windowSeconds | quote }}
- name: PORTAL_METRICS_TIMEOUT_SECONDS
  value: {{ .Values.config.metrics.timeoutSeconds | quote }}
{{- range $name, $token := dict "PORTAL_DCGM_TOKEN" .Values.config.metrics.dcgmToken "PORTAL_PROMETHEUS_TOKEN" .Values.config.metrics.prometheusToken "PORTAL_METRICS_TOKEN" .Values.config.metrics.portalMetricsToken }}
{{- if $token.existingSecret }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ $token.existingSecret | quote }}
      key: {{ $token.existingSecretKey | quote }}
{{- end }}
{{- end }}
- name: PORTAL_IDLE_ENABLED
  value: {{ .Values.config.idle.enabled | quote }}
- name: PORTAL_IDLE_THRESHOLD_PERCENT
  value: {{ .Values.config.idle.thresholdPercent | quote }}
- name: PORTAL_IDLE_MINUTES
  value: {{ .Values.config.idle.minutes | quote }}
- name: PORTAL_IDLE_GRACE_MINUTES
  value: {{ .Values.config.idle.graceMinutes | quote }}
- name: PORTAL_USAGE_MINUTE_RETENTION_DAYS
  value: {{ .Values.config.usageRetention.minuteDays | quote }}
- name: PORTAL_USAGE_HOUR_RETENTION_DAYS
  value: {{ .Values.config.usageRetention.hourDays | quote }}
- name: PORTAL_LOGIN_MAX_FAILURES
  value: {{ .Values.config.loginMaxFailures | quote }}
- name: PORTAL_LOGIN_MAX_FAILURES_PER_IP
  value: {{ .Values.config.loginMaxFailuresPerIp | quote }}
- name: PORTAL_LOGIN_LOCKOUT_SECONDS
  value: {{ .Values.config.loginLockoutSeconds | quote }}
- name: PORTAL_LOGIN_TRUSTED_PROXIES
  value: {{ .Values.config.trustedProxies | quote }}
{{- if .Values.sso.issuer }}
- name: OIDC_ISSUER
  value: {{ .Values.sso.issuer | quote }}
- name: OIDC_CLIENT_ID
  value: {{ required "sso.clientId is required when sso.issuer is set" .Values.sso.clientId | quote }}
- name: OIDC_CLIENT_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ required "sso.clientSecretSecret is required when sso.issuer is set" .Values.sso.clientSecretSecret | quote }}
      key: {{ .Values.sso.clientSecretKey | quote }}
- name: OIDC_GROUPS_CLAIM
  value: {{ .Values.sso.groupsClaim | quote }}
- name: OIDC_TEAM_GROUP_PATTERN
  value: {{ .Values.sso.teamGroupPattern | quote }}
- name: OIDC_GROUP_MAP
  value: {{ toJson .Values.sso.groupMap | quote }}
- name: OIDC_ADMIN_GROUP
  value: {{ .Values.sso.adminGroup | quote }}
{{- end }}
{{- range $name, $value := .Values.config.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}
