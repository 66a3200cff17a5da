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

{{/* A worker pod's termination grace: the worker's own shutdown grace plus a margin. Takes
the worker values (of a pool). */}}
{{- define "tickwork.workerTerminationGrace" -}}
{{- add (.shutdownGraceSeconds | ceil) .terminationGraceMarginSeconds -}}
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

{{/* ``over`` laid over ``base``: maps merge key by key, anything else in ``over`` (a list, a
false, a 0, a null) replaces. Sprig's merge would let a base's true win over a pool's false. */}}
{{- define "tickwork.overlay" -}}
{{- $out := deepCopy .base -}}
{{- range $key, $value := .over -}}
{{- $old := index $out $key -}}
{{- if and (kindIs "map" $value) (kindIs "map" $old) -}}
{{- $_ := set $out $key (include "tickwork.overlay" (dict "base" $old "over" $value) | fromYaml) -}}
{{- else -}}
{{- $_ := set $out $key $value -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The worker pools, as a YAML list for fromYamlArray. Without workerPools: one pool, the
values of worker/autoscaling/keda as they are, named "<fullname>-worker". With workerPools:
each pool is its entry laid over worker (and its autoscaling/keda over the top-level ones),
named "<fullname>-worker-<name>", its objects labelled tickwork.io/worker-pool: <name>.
Nothing when worker.enabled is false; a pool whose enabled is false is left out. */}}
{{- define "tickwork.workerPools" -}}
{{- $pools := list -}}
{{- if .Values.worker.enabled -}}
{{- if .Values.workerPools -}}
{{- $seen := dict -}}
{{- range $i, $entry := .Values.workerPools -}}
{{- if not $entry.name -}}
{{- fail (printf "workerPools[%d] has no name: every worker pool needs a name (it names its Deployment, ServiceAccount, autoscaler and PodDisruptionBudget)" $i) -}}
{{- end -}}
{{- if hasKey $seen $entry.name -}}
{{- fail (printf "workerPools[%d] is named %q like workerPools[%d]: pool names must be unique" $i $entry.name (index $seen $entry.name)) -}}
{{- end -}}
{{- $_ := set $seen $entry.name $i -}}
{{- $worker := include "tickwork.overlay" (dict "base" $.Values.worker "over" (omit $entry "name" "autoscaling" "keda")) | fromYaml -}}
{{- if $worker.enabled -}}
{{- $name := include "tickwork.componentName" (dict "root" $ "component" (printf "worker-%s" $entry.name)) -}}
{{- $pools = append $pools (dict
  "name" $name
  "labels" (dict "tickwork.io/worker-pool" $entry.name)
  "serviceAccountName" (include "tickwork.serviceAccountName" (dict "serviceAccount" $worker.serviceAccount "default" $name))
  "worker" $worker
  "autoscaling" (include "tickwork.overlay" (dict "base" $.Values.autoscaling "over" ($entry.autoscaling | default dict)) | fromYaml)
  "keda" (include "tickwork.overlay" (dict "base" $.Values.keda "over" ($entry.keda | default dict)) | fromYaml)) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- $name := include "tickwork.componentName" (dict "root" . "component" "worker") -}}
{{- $pools = list (dict
  "name" $name
  "labels" dict
  "serviceAccountName" (include "tickwork.serviceAccountName" (dict "serviceAccount" .Values.worker.serviceAccount "default" $name))
  "worker" .Values.worker
  "autoscaling" .Values.autoscaling
  "keda" .Values.keda) -}}
{{- end -}}
{{- end -}}
{{- toYaml $pools -}}
{{- end -}}

{{/* A ServiceAccount's name: (dict "serviceAccount" <values> "default" <name if created>). */}}
{{- define "tickwork.serviceAccountName" -}}
{{- if .serviceAccount.create -}}
{{- default .default .serviceAccount.name -}}
{{- else -}}
{{- default "default" .serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels of a worker pool's objects, and the labels selecting its pods:
(dict "root" $ "pool" $pool). */}}
{{- define "tickwork.poolLabels" -}}
{{ include "tickwork.componentLabels" (dict "root" .root "component" "worker") }}
{{- with .pool.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "tickwork.poolSelectorLabels" -}}
{{ include "tickwork.componentSelectorLabels" (dict "root" .root "component" "worker") }}
{{- with .pool.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The Secret holding the webhook's certificate: webhook.tlsSecret, or with cert-manager
(webhook.certManager.enabled) by default the one its Certificate writes. */}}
{{- define "tickwork.webhookTlsSecret" -}}
{{- if .Values.webhook.certManager.enabled -}}
{{- default (printf "%s-tls" (include "tickwork.componentName" (dict "root" . "component" "webhook"))) .Values.webhook.tlsSecret -}}
{{- else -}}
{{- required "webhook.tlsSecret: the webhook needs a TLS Secret (tls.crt, tls.key, ca.crt), e.g. from cert-manager, or set webhook.certManager.enabled" .Values.webhook.tlsSecret -}}
{{- end -}}
{{- end -}}

{{/* The database Secret and key of the migration Job: migrations.database.existingSecret
(e.g. an owner role's credentials), else the one every role uses. */}}
{{- define "tickwork.migrationDatabaseEnv" -}}
{{- if .Values.migrations.database.existingSecret -}}
- name: TICKWORK_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.migrations.database.existingSecret }}
      key: {{ .Values.migrations.database.existingSecretKey }}
{{- else -}}
{{ include "tickwork.databaseEnv" . }}
{{- end -}}
{{- end -}}
