{{/* The chart's name, or nameOverride. */}}
{{- define "goodput.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* fullnameOverride, or "<release>-<name>", or the release name alone when it already
contains the name. Object names are "<fullname>-<component>". */}}
{{- define "goodput.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "goodput.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "goodput.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels that select the release's pods; a workload adds app.kubernetes.io/component. */}}
{{- define "goodput.selectorLabels" -}}
app.kubernetes.io/name: {{ include "goodput.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Kubernetes' recommended labels, on every object. */}}
{{- define "goodput.labels" -}}
helm.sh/chart: {{ include "goodput.chart" . }}
{{ include "goodput.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/part-of: goodput
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "goodput.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "goodput.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The migration hook runs before the release's ServiceAccount exists: it gets one of its own. */}}
{{- define "goodput.migrateServiceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- printf "%s-migrate" (include "goodput.fullname" .) -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "goodput.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Secret names: yours (the value may be a template) or the chart's. */}}
{{- define "goodput.authSecretName" -}}
{{- if .Values.auth.existingSecret -}}{{ tpl .Values.auth.existingSecret . }}{{- else -}}{{ include "goodput.fullname" . }}-tokens{{- end -}}
{{- end -}}

{{- define "goodput.pgSecretName" -}}
{{- if .Values.postgres.existingSecret -}}{{ tpl .Values.postgres.existingSecret . }}{{- else -}}{{ include "goodput.fullname" . }}-postgres{{- end -}}
{{- end -}}

{{- define "goodput.redisSecretName" -}}
{{- if .Values.redis.existingSecret -}}{{ tpl .Values.redis.existingSecret . }}{{- else -}}{{ include "goodput.fullname" . }}-redis{{- end -}}
{{- end -}}

{{/* True (non-empty) when the whole DSN comes from a key of postgres.existingSecret. Fails
when that is asked of a secret the chart would create, or when there is no DSN at all. */}}
{{- define "goodput.dsnFromSecret" -}}
{{- if .Values.postgres.secretKeys.dsn -}}
{{- if not .Values.postgres.existingSecret -}}
{{- fail "postgres.secretKeys.dsn reads the DSN from postgres.existingSecret: set postgres.existingSecret too" -}}
{{- end -}}
true
{{- else -}}
{{- $_ := required "postgres.dsn is empty: set it, or keep the DSN in postgres.existingSecret under the key named by postgres.secretKeys.dsn" .Values.postgres.dsn -}}
{{- end -}}
{{- end -}}

{{/* The database environment of a container: the password, and the DSN when it is secret. */}}
{{- define "goodput.postgresEnv" -}}
- name: PGPASSWORD
  valueFrom: {secretKeyRef: {name: {{ include "goodput.pgSecretName" . }}, key: {{ .Values.postgres.secretKeys.password }}, optional: true}}
{{- if include "goodput.dsnFromSecret" . }}
- name: GOODPUT_POSTGRES__DSN
  valueFrom: {secretKeyRef: {name: {{ include "goodput.pgSecretName" . }}, key: {{ .Values.postgres.secretKeys.dsn }}}}
{{- end }}
{{- end -}}

{{/* The common part of every service's config file. */}}
{{- define "goodput.commonConfig" -}}
postgres:
  # With postgres.secretKeys.dsn the DSN comes from the secret (GOODPUT_POSTGRES__DSN).
  dsn: {{ if include "goodput.dsnFromSecret" . }}""{{ else }}{{ .Values.postgres.dsn | quote }}{{ end }}
  pool_size: {{ .Values.postgres.poolSize }}
redis:
  host: {{ .Values.redis.host | quote }}
  port: {{ .Values.redis.port }}
  db: {{ .Values.redis.db }}
log:
  level: {{ .Values.log.level }}
  format: {{ .Values.log.format }}
shutdown:
  drain_timeout_s: {{ .Values.shutdown.drainTimeoutSeconds }}
auth:
  enabled: {{ .Values.auth.enabled }}
  token_files:
    scheduler: /etc/goodput/tokens/scheduler
    telemetry: /etc/goodput/tokens/telemetry
    sdk: /etc/goodput/tokens/sdk
    operator: /etc/goodput/tokens/operator
    service: /etc/goodput/tokens/service
  {{- if or .Values.auth.scopedTokens .Values.auth.existingSecretHasScoped }}
  token_file: /etc/goodput/tokens/scoped
  {{- end }}
  metrics: {{ .Values.auth.metrics }}
{{- if .Values.tls.enabled }}
tls:
  cert_file: /etc/goodput/tls/tls.crt
  key_file: /etc/goodput/tls/tls.key
  ca_file: /etc/goodput/tls/ca.crt
  {{- if .Values.tls.mutual }}
  client_ca_file: /etc/goodput/tls/ca.crt
  {{- end }}
  {{- with .Values.tls.serverName }}
  server_name: {{ . | quote }}
  {{- end }}
  reload_interval_s: {{ .Values.tls.reloadIntervalSeconds }}
{{- end }}
{{- end -}}

{{/* The TLS secret's name (required with tls.enabled). */}}
{{- define "goodput.tlsSecretName" -}}
{{- tpl (required "tls.secretName is required with tls.enabled (a secret with tls.crt, tls.key, ca.crt)" .Values.tls.secretName) . -}}
{{- end -}}

{{/* The env entry giving a forwarding service its client token. Call with (dict "root" $ "name" "ofu"). */}}
{{- define "goodput.forwardTokenEnv" -}}
name: GOODPUT_{{ upper .name }}__FORWARD__TOKEN
valueFrom: {secretKeyRef: {name: {{ include "goodput.authSecretName" .root }}, key: client-token, optional: true}}
{{- end -}}

{{- define "goodput.reportsTokenEnv" -}}
name: GOODPUT_ALERTING__REPORTS__TOKEN
valueFrom: {secretKeyRef: {name: {{ include "goodput.authSecretName" . }}, key: client-token, optional: true}}
{{- end -}}

{{- define "goodput.mfuMetricsTokenEnv" -}}
name: GOODPUT_INGEST__MFU_METRICS__TOKEN
valueFrom: {secretKeyRef: {name: {{ include "goodput.authSecretName" . }}, key: client-token, optional: true}}
{{- end -}}

{{/* A service pod's annotations for Prometheus's annotation-based discovery, if wanted. Call
with (dict "root" $ "svc" .Values.ingest). */}}
{{- define "goodput.scrapeAnnotations" -}}
{{- if .root.Values.prometheusScrapeAnnotations -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .svc.probePort | quote }}
prometheus.io/path: /metrics
{{- end -}}
{{- end -}}

{{/*
A workload's pod template metadata: selector labels, component, podLabels and the
workload's own, and the annotations likewise. Call with
(dict "root" $ "component" "ingest" "svc" .Values.ingest "annotations" (dict ...)).
*/}}
{{- define "goodput.podMetadata" -}}
{{- $root := .root -}}
labels:
  {{- include "goodput.labels" $root | nindent 2 }}
  app.kubernetes.io/component: {{ .component }}
  {{- with merge (dict) (.svc.podLabels | default dict) $root.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with merge (dict) (.annotations | default dict) (.svc.podAnnotations | default dict) $root.Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Scheduling, identity and security of a pod: service account, pull secrets, pod security
context, and each scheduling key from the workload's values when set, else the global one.
Call with (dict "root" $ "component" "ingest" "svc" .Values.ingest); "noSpread" true leaves
out topology spread (a Job's single pod), "serviceAccountName" names another account.
*/}}
{{- define "goodput.podCommon" -}}
{{- $root := .root -}}
serviceAccountName: {{ .serviceAccountName | default (include "goodput.serviceAccountName" $root) }}
automountServiceAccountToken: {{ $root.Values.serviceAccount.automount }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $root.Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .svc.priorityClassName | default $root.Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .svc.nodeSelector | default $root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .svc.tolerations | default $root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .svc.affinity | default $root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if not .noSpread }}
{{- with .svc.topologySpreadConstraints | default $root.Values.topologySpreadConstraints }}
{{- $selector := fromYaml (include "goodput.selectorLabels" $root) }}
{{- $_ := set $selector "app.kubernetes.io/component" $.component }}
topologySpreadConstraints:
  {{- range . }}
  {{- $constraint := deepCopy . }}
  {{- if not (hasKey $constraint "labelSelector") }}
  {{- $_ := set $constraint "labelSelector" (dict "matchLabels" $selector) }}
  {{- end }}
  - {{ toYaml $constraint | nindent 4 | trim }}
  {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The writable /tmp of every pod (the root filesystem is read-only). */}}
{{- define "goodput.tmpVolume" -}}
- name: tmp
  emptyDir:
    {{- with .Values.tmpVolume.medium }}
    medium: {{ . }}
    {{- end }}
    {{- with .Values.tmpVolume.sizeLimit }}
    sizeLimit: {{ . }}
    {{- end }}
{{- end -}}

{{/*
A service's pod spec. Call with (dict "root" $ "name" "ingest" "svc" .Values.ingest "extraEnv" list).
*/}}
{{- define "goodput.podSpec" -}}
{{- $root := .root -}}
{{- include "goodput.podCommon" (dict "root" $root "component" .name "svc" .svc) }}
terminationGracePeriodSeconds: {{ add $root.Values.shutdown.drainTimeoutSeconds 10 }}
containers:
  - name: {{ .name }}
    image: {{ include "goodput.image" $root | quote }}
    imagePullPolicy: {{ $root.Values.image.pullPolicy }}
    command: ["goodput-{{ .name }}", "--config", "/etc/goodput/config.yaml"]
    {{- with $root.Values.securityContext }}
    securityContext:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    ports:
      - {name: grpc, containerPort: {{ .svc.grpcPort }}}
      - {name: http, containerPort: {{ .svc.httpPort }}}
      - {name: probe, containerPort: {{ .svc.probePort }}}
    env:
      {{- include "goodput.postgresEnv" $root | nindent 6 }}
      - name: GOODPUT_REDIS__PASSWORD
        valueFrom: {secretKeyRef: {name: {{ include "goodput.redisSecretName" $root }}, key: {{ $root.Values.redis.secretKeys.password }}, optional: true}}
      {{- range .extraEnv }}
      - {{ toYaml . | nindent 8 | trim }}
      {{- end }}
      {{- with $root.Values.extraEnv }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    readinessProbe:
      {{- if $root.Values.tls.enabled }}
      # The kubelet's gRPC probe speaks plaintext only: /healthz follows the gRPC health.
      httpGet: {path: /healthz, port: probe, scheme: HTTPS}
      {{- else }}
      grpc: {port: {{ .svc.grpcPort }}}
      {{- end }}
      periodSeconds: 5
    livenessProbe:
      httpGet: {path: /healthz, port: probe{{ if $root.Values.tls.enabled }}, scheme: HTTPS{{ end }}}
      initialDelaySeconds: 10
      periodSeconds: 10
      failureThreshold: 6
    resources:
      {{- toYaml .svc.resources | nindent 6 }}
    volumeMounts:
      - {name: config, mountPath: /etc/goodput/config.yaml, subPath: {{ .name }}.yaml, readOnly: true}
      - {name: tokens, mountPath: /etc/goodput/tokens, readOnly: true}
      {{- if $root.Values.tls.enabled }}
      - {name: tls, mountPath: /etc/goodput/tls, readOnly: true}
      {{- end }}
      - {name: tmp, mountPath: /tmp}
      {{- with $root.Values.extraVolumeMounts }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
volumes:
  - name: config
    configMap: {name: {{ include "goodput.fullname" $root }}-config}
  - name: tokens
    secret: {secretName: {{ include "goodput.authSecretName" $root }}, optional: {{ not $root.Values.auth.enabled }}}
  {{- if $root.Values.tls.enabled }}
  - name: tls
    secret: {secretName: {{ include "goodput.tlsSecretName" $root }}}
  {{- end }}
  {{- include "goodput.tmpVolume" $root | nindent 2 }}
  {{- with $root.Values.extraVolumes }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/*
A workload's PodDisruptionBudget: its own podDisruptionBudget when set, else the global one.
Call with (dict "root" $ "component" "ingest" "svc" .Values.ingest).
*/}}
{{- define "goodput.pdb" -}}
{{- $root := .root -}}
{{- $pdb := .svc.podDisruptionBudget | default $root.Values.podDisruptionBudget -}}
{{- if get $pdb "enabled" }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "goodput.fullname" $root }}-{{ .component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "goodput.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  selector:
    matchLabels:
      {{- include "goodput.selectorLabels" $root | nindent 6 }}
      app.kubernetes.io/component: {{ .component }}
  {{- $min := get $pdb "minAvailable" }}
  {{- $max := get $pdb "maxUnavailable" }}
  {{- $hasMin := not (or (kindIs "invalid" $min) (eq (toString $min) "")) }}
  {{- $hasMax := not (or (kindIs "invalid" $max) (eq (toString $max) "")) }}
  {{- if and $hasMin $hasMax }}
  {{- fail (printf "podDisruptionBudget of %s: give minAvailable or maxUnavailable, not both" .component) }}
  {{- else if $hasMin }}
  minAvailable: {{ $min }}
  {{- else if $hasMax }}
  maxUnavailable: {{ $max }}
  {{- else }}
  {{- fail (printf "podDisruptionBudget of %s: give minAvailable or maxUnavailable" .component) }}
  {{- end }}
  {{- with get $pdb "unhealthyPodEvictionPolicy" }}
  unhealthyPodEvictionPolicy: {{ . }}
  {{- end }}
{{- end }}
{{- end -}}
