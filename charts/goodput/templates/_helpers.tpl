{{/* "<release>-goodput", or the release name alone when it already says goodput. */}}
{{- define "goodput.fullname" -}}
{{- if contains "goodput" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-goodput" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "goodput.labels" -}}
app.kubernetes.io/name: goodput
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "goodput.authSecretName" -}}
{{- if .Values.auth.existingSecret -}}{{ .Values.auth.existingSecret }}{{- else -}}{{ include "goodput.fullname" . }}-tokens{{- end -}}
{{- end -}}

{{- define "goodput.pgSecretName" -}}
{{- if .Values.postgres.existingSecret -}}{{ .Values.postgres.existingSecret }}{{- else -}}{{ include "goodput.fullname" . }}-postgres{{- end -}}
{{- end -}}

{{- define "goodput.redisSecretName" -}}
{{- if .Values.redis.existingSecret -}}{{ .Values.redis.existingSecret }}{{- else -}}{{ include "goodput.fullname" . }}-redis{{- end -}}
{{- end -}}

{{/* The common part of every service's config file. */}}
{{- define "goodput.commonConfig" -}}
postgres:
  dsn: {{ .Values.postgres.dsn | quote }}
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
{{- end -}}

{{/* The env entry giving a forwarding service its client token. Call with (dict "root" $ "name" "ofu"). */}}
{{- define "goodput.forwardTokenEnv" -}}
name: GOODPUT_{{ upper .name }}__FORWARD__TOKEN
valueFrom: {secretKeyRef: {name: {{ include "goodput.authSecretName" .root }}, key: client-token, optional: true}}
{{- end -}}

{{- define "goodput.mfuMetricsTokenEnv" -}}
name: GOODPUT_INGEST__MFU_METRICS__TOKEN
valueFrom: {secretKeyRef: {name: {{ include "goodput.authSecretName" . }}, key: client-token, optional: true}}
{{- end -}}

{{/*
A service's pod spec. Call with (dict "root" $ "name" "ingest" "svc" .Values.ingest "extraEnv" list).
*/}}
{{- define "goodput.podSpec" -}}
{{- $root := .root -}}
terminationGracePeriodSeconds: {{ add $root.Values.shutdown.drainTimeoutSeconds 10 }}
containers:
  - name: {{ .name }}
    image: "{{ $root.Values.image.repository }}:{{ $root.Values.image.tag }}"
    imagePullPolicy: {{ $root.Values.image.pullPolicy }}
    command: ["goodput-{{ .name }}", "--config", "/etc/goodput/config.yaml"]
    ports:
      - {name: grpc, containerPort: {{ .svc.grpcPort }}}
      - {name: http, containerPort: {{ .svc.httpPort }}}
      - {name: probe, containerPort: {{ .svc.probePort }}}
    env:
      - name: PGPASSWORD
        valueFrom: {secretKeyRef: {name: {{ include "goodput.pgSecretName" $root }}, key: password, optional: true}}
      - name: GOODPUT_REDIS__PASSWORD
        valueFrom: {secretKeyRef: {name: {{ include "goodput.redisSecretName" $root }}, key: password, optional: true}}
      {{- range .extraEnv }}
      - {{ toYaml . | nindent 8 | trim }}
      {{- end }}
    readinessProbe:
      grpc: {port: {{ .svc.grpcPort }}}
      periodSeconds: 5
    livenessProbe:
      httpGet: {path: /healthz, port: probe}
      initialDelaySeconds: 10
      periodSeconds: 10
      failureThreshold: 6
    resources:
      {{- toYaml .svc.resources | nindent 6 }}
    volumeMounts:
      - {name: config, mountPath: /etc/goodput/config.yaml, subPath: {{ .name }}.yaml}
      - {name: tokens, mountPath: /etc/goodput/tokens, readOnly: true}
volumes:
  - name: config
    configMap: {name: {{ include "goodput.fullname" $root }}-config}
  - name: tokens
    secret: {secretName: {{ include "goodput.authSecretName" $root }}, optional: {{ not $root.Values.auth.enabled }}}
{{- end -}}
