{{/*
The labels of every object: Helm's standard ones, and the part-of label the kustomize base sets.
Pod templates and selectors carry only app.kubernetes.io/name and component, as the base's do,
so an install moved between kustomize and Helm keeps its selectors (they are immutable).
*/}}
{{- define "podmedic.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: podmedic
{{- end }}

{{/* The metadata of a namespaced object: name, namespace, labels (plus a process's name and component, or
   only the name label of the process a Service fronts: app). */}}
{{- define "podmedic.metadata" -}}
name: {{ .name }}
namespace: {{ .root.Release.Namespace }}
labels:
  {{- include "podmedic.labels" .root | nindent 2 }}
  {{- with .component }}
  app.kubernetes.io/name: podmedic-{{ . }}
  app.kubernetes.io/component: {{ . }}
  {{- end }}
  {{- with .app }}
  app.kubernetes.io/name: {{ . }}
  {{- end }}
{{- end }}

{{/* The image: repository:tag, @digest when pinned. */}}
{{- define "podmedic.image" -}}
{{- $image := printf "%s:%s" .Values.image.repository .Values.image.tag -}}
{{- if .Values.image.digest }}{{ $image = printf "%s@%s" $image .Values.image.digest }}{{ end -}}
image: {{ $image }}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end }}

{{/* The pod security context of podmedic's own processes (non-root, no privileges). */}}
{{- define "podmedic.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{- define "podmedic.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop: [ALL]
{{- end }}

{{/* Spread a Deployment's replicas over nodes. */}}
{{- define "podmedic.spread" -}}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        app.kubernetes.io/name: {{ . }}
{{- end }}

{{/* Scheduling and pull secrets of one process's values (nodeSelector, tolerations). */}}
{{- define "podmedic.scheduling" -}}
{{- with .values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The policy file: the value, or the shipped default. */}}
{{- define "podmedic.policy" -}}
{{- .Values.policy | default (.Files.Get "files/policy.yaml") -}}
{{- end }}

{{/* Pod template annotations that roll the pods when their configuration changes. */}}
{{- define "podmedic.checksums" -}}
checksum/config: {{ include (print .Template.BasePath "/config.yaml") . | sha256sum }}
{{- end }}

{{/* The Secret podmedic-temporal's name: the operator's, or the chart's own. */}}
{{- define "podmedic.temporalSecret" -}}
{{- .Values.temporal.existingSecret | default "podmedic-temporal" -}}
{{- end }}

{{/* Whether the Temporal credentials come from a Secret (mounted at /var/run/secrets/temporal). */}}
{{- define "podmedic.temporalMounted" -}}
{{- $t := .Values.temporal -}}
{{- if or (ne $t.auth "none") $t.tls.ca $t.tls.caInSecret }}true{{ end -}}
{{- end }}

{{/* The worker's and the ingest's variables for Temporal's credentials and the payload key. */}}
{{- define "podmedic.temporalEnv" -}}
{{- $t := .Values.temporal -}}
{{- $dir := "/var/run/secrets/temporal" -}}
{{- if eq $t.auth "apiKey" }}
- {name: PODMEDIC_TEMPORAL_API_KEY_FILE, value: {{ $dir }}/api-key}
{{- end }}
{{- if and $t.tls.enabled (eq $t.auth "none") }}
- {name: PODMEDIC_TEMPORAL_TLS, value: "1"}
{{- end }}
{{- if or $t.tls.caInSecret (and $t.tls.ca (not $t.existingSecret)) }}
- {name: PODMEDIC_TEMPORAL_TLS_CA, value: {{ $dir }}/ca.crt}
{{- end }}
{{- if eq $t.auth "mtls" }}
- {name: PODMEDIC_TEMPORAL_TLS_CERT, value: {{ $dir }}/tls.crt}
- {name: PODMEDIC_TEMPORAL_TLS_KEY, value: {{ $dir }}/tls.key}
{{- end }}
{{- with $t.tls.serverName }}
- {name: PODMEDIC_TEMPORAL_TLS_SERVER_NAME, value: {{ . | quote }}}
{{- end }}
{{- if $t.payloadKeySecret }}
- {name: PODMEDIC_PAYLOAD_KEY_FILE, value: /var/run/secrets/podmedic/payload/keys}
{{- end }}
{{- end }}

{{- define "podmedic.temporalMounts" -}}
{{- if include "podmedic.temporalMounted" . }}
- {name: temporal, mountPath: /var/run/secrets/temporal, readOnly: true}
{{- end }}
{{- if .Values.temporal.payloadKeySecret }}
- {name: payload-key, mountPath: /var/run/secrets/podmedic/payload, readOnly: true}
{{- end }}
{{- end }}

{{- define "podmedic.temporalVolumes" -}}
{{- if include "podmedic.temporalMounted" . }}
- {name: temporal, secret: {secretName: {{ include "podmedic.temporalSecret" . }}}}
{{- end }}
{{- with .Values.temporal.payloadKeySecret }}
- {name: payload-key, secret: {secretName: {{ . }}}}
{{- end }}
{{- end }}

{{/* Refuse combinations the schema cannot express, naming the values to change. */}}
{{- define "podmedic.validate" -}}
{{- $t := .Values.temporal -}}
{{- if and (eq $t.auth "apiKey") (not $t.existingSecret) (not $t.apiKey) }}
{{- fail "temporal.auth is apiKey: set temporal.existingSecret (a Secret with key api-key) or temporal.apiKey" }}
{{- end }}
{{- if and (eq $t.auth "mtls") (not $t.existingSecret) (not (and $t.tls.cert $t.tls.key)) }}
{{- fail "temporal.auth is mtls: set temporal.existingSecret (tls.crt, tls.key) or both temporal.tls.cert and temporal.tls.key" }}
{{- end }}
{{- if and $t.existingSecret (or $t.apiKey $t.tls.cert $t.tls.key $t.tls.ca) }}
{{- fail "temporal.existingSecret is set: leave temporal.apiKey and temporal.tls.ca/cert/key empty (they would be ignored)" }}
{{- end }}
{{- if and (ne $t.auth "mtls") (or $t.tls.cert $t.tls.key) }}
{{- fail "temporal.tls.cert and temporal.tls.key are a client certificate: set temporal.auth to mtls" }}
{{- end }}
{{- if and $t.tls.caInSecret (not $t.existingSecret) }}
{{- fail "temporal.tls.caInSecret needs temporal.existingSecret (the Secret that holds ca.crt)" }}
{{- end }}
{{- if and (eq .Values.workerVersioning.deploymentName "") (ne .Values.workerVersioning.buildId "") }}
{{- fail "workerVersioning.buildId needs workerVersioning.deploymentName" }}
{{- end }}
{{- end }}
