{{/*
Names, labels and the pieces every pod shares. Every template takes its names and labels
from here.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "tickwork.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every resource name: fullnameOverride, the release name when it already
contains the chart name, or "<release>-<chart>". */}}
{{- define "tickwork.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A component's resource name: (dict "root" $ "component" "worker"). */}}
{{- define "tickwork.componentName" -}}
{{- printf "%s-%s" (include "tickwork.fullname" .root | trunc (int (sub 62 (len .component))) | trimSuffix "-") .component -}}
{{- end -}}

{{- define "tickwork.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "tickwork.labels" -}}
helm.sh/chart: {{ include "tickwork.chart" . }}
{{ include "tickwork.selectorLabels" . }}
app.kubernetes.io/version: {{ include "tickwork.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tickwork
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels that select the release's objects. */}}
{{- define "tickwork.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tickwork.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of a component's objects: (dict "root" $ "component" "worker"). */}}
{{- define "tickwork.componentLabels" -}}
{{ include "tickwork.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Labels selecting a component's pods: (dict "root" $ "component" "worker"). */}}
{{- define "tickwork.componentSelectorLabels" -}}
{{ include "tickwork.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "tickwork.operatorServiceAccountName" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (include "tickwork.componentName" (dict "root" . "component" "operator")) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "tickwork.workerServiceAccountName" -}}
{{- if .Values.worker.serviceAccount.create -}}
{{- default (include "tickwork.componentName" (dict "root" . "component" "worker")) .Values.worker.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.worker.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "tickwork.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{/* The image reference: repository@digest, or repository:tag. */}}
{{- define "tickwork.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (include "tickwork.imageTag" .) -}}
{{- end -}}
{{- end -}}

{{/* The Secret and key holding the database connection string. Fails with a readable
message when the chart does not know where the database is. */}}
{{- define "tickwork.databaseSecretName" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecret -}}
{{- else if .Values.database.url -}}
{{- include "tickwork.componentName" (dict "root" . "component" "database") -}}
{{- else -}}
{{- fail "tickwork needs a database: set database.existingSecret to a Secret holding a libpq connection string (recommended), or database.url for a quick start" -}}
{{- end -}}
{{- end -}}

{{- define "tickwork.databaseSecretKey" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecretKey -}}
{{- else -}}
url
{{- end -}}
{{- end -}}

{{/* The environment variable every role reads the database from, out of the Secret. */}}
{{- define "tickwork.databaseEnv" -}}
- name: TICKWORK_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "tickwork.databaseSecretName" . }}
      key: {{ include "tickwork.databaseSecretKey" . }}
{{- end -}}

{{/* Optional pod-spec blocks: each renders nothing when its value is empty. Use as
{{- with include "tickwork.podSecurityContext" . }}{{ . | nindent 6 }}{{ end }} */}}
{{- define "tickwork.podSecurityContext" -}}
{{- with .Values.podSecurityContext -}}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{- define "tickwork.containerSecurityContext" -}}
{{- with .Values.containerSecurityContext -}}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{- define "tickwork.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets -}}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* A writable /tmp on the read-only root filesystem. */}}
{{- define "tickwork.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}

{{- define "tickwork.tmpVolumeMount" -}}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* The worker's pod termination grace: the worker's own shutdown grace plus a margin. */}}
{{- define "tickwork.workerTerminationGrace" -}}
{{- add (.Values.worker.shutdownGraceSeconds | ceil) .Values.worker.terminationGraceMarginSeconds -}}
{{- end -}}

{{/* A value quoted as an SQL string literal. */}}
{{- define "tickwork.sqlLiteral" -}}
'{{ replace "'" "''" (toString .) }}'
{{- end -}}

{{/* An SQL array literal of strings: (list "a" "b") -> ARRAY['a','b']::text[]. */}}
{{- define "tickwork.sqlTextArray" -}}
{{- $items := list -}}
{{- range . -}}
{{- $items = append $items (include "tickwork.sqlLiteral" .) -}}
{{- end -}}
ARRAY[{{ join "," $items }}]::text[]
{{- end -}}

{{/* The KEDA query: open jobs of the workers' queues due within leadSeconds, plus enabled,
unsuspended schedules of the workers' namespaces due within leadSeconds (so a worker is
running when they fall due, even after KEDA scaled to zero). Database clock (now()). */}}
{{- define "tickwork.kedaQuery" -}}
{{- $lead := int .Values.keda.leadSeconds -}}
SELECT (SELECT count(*) FROM tickwork.jobs WHERE status IN ('available', 'running') AND run_at <= now() + make_interval(secs => {{ $lead }})
{{- if .Values.worker.queues }} AND queue = ANY({{ include "tickwork.sqlTextArray" .Values.worker.queues }}){{ end }})
{{- if .Values.worker.namespaces }} + (SELECT count(*) FROM tickwork.schedules WHERE enabled AND NOT suspended AND next_run_at <= now() + make_interval(secs => {{ $lead }}) AND namespace = ANY({{ include "tickwork.sqlTextArray" .Values.worker.namespaces }})){{ end }}
{{- end -}}
