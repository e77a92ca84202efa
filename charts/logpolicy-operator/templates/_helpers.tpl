{{/* The chart's name. */}}
{{- define "logpolicy-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name: the release name, plus the chart name unless it contains it. */}}
{{- define "logpolicy-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* name-version, for the helm.sh/chart label. */}}
{{- define "logpolicy-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels of every object. */}}
{{- define "logpolicy-operator.labels" -}}
helm.sh/chart: {{ include "logpolicy-operator.chart" . }}
{{ include "logpolicy-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: logpolicy
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The labels that select the operator's pods (never change them: selectors are immutable). */}}
{{- define "logpolicy-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "logpolicy-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ServiceAccount's name. */}}
{{- define "logpolicy-operator.serviceAccountName" -}}
{{- default (include "logpolicy-operator.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/* The image, tag defaulting to the appVersion. */}}
{{/* repository@digest when image.digest is set (the tag is then ignored), else repository:tag. */}}
{{- define "logpolicy-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* "true" when the replicas elect a leader (more than one replica). */}}
{{- define "logpolicy-operator.leaderElection" -}}
{{- if gt (int .Values.replicaCount) 1 }}true{{ end }}
{{- end }}

{{/* The Secret the operator reads (and creates) its signing key in, when no existing one is given. */}}
{{- define "logpolicy-operator.signingKeySecret" -}}
logpolicy-signing-key
{{- end }}

{{/* The rules the operator needs in each watched namespace (operator/README.md, Permissions). */}}
{{- define "logpolicy-operator.watchRules" -}}
- apiGroups: ["logpolicy.dev"]
  resources: ["logpolicies"]
  verbs: ["list", "watch"]
- apiGroups: ["logpolicy.dev"]
  resources: ["logpolicies/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: [""]
  resources: ["configmaps"]
  resourceNames: ["logpolicy-trust"]
  verbs: ["create", "patch", "list", "watch", "delete"]
{{- end }}

{{/* The rules the operator needs in its own namespace (the Lease always). */}}
{{- define "logpolicy-operator.ownRules" -}}
{{- if not .Values.signingKey.existingSecret }}
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: [{{ include "logpolicy-operator.signingKeySecret" . | quote }}]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["create"]
{{- end }}
{{- /* The Lease: leader election, else a heartbeat (operator/README.md) */}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames: ["logpolicy-operator"]
  verbs: ["get", "update"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
{{- end }}

{{/*
The image pull policy: as set, else IfNotPresent for an image pinned by digest and
Always for a tag (which may move).
*/}}
{{- define "logpolicy-operator.imagePullPolicy" -}}
{{ .Values.image.pullPolicy | default (ternary "IfNotPresent" "Always" (not (empty .Values.image.digest))) }}
{{- end }}

{{/*
The securityContext of the operator's container and of the helm test's.
*/}}
{{- define "logpolicy-operator.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The egress of the operator's pods and of the helm test's pod: the API server, and the
admin ports of opted-in pods in the watched namespaces (every namespace without
watchNamespaces).
*/}}
{{- define "logpolicy-operator.egress" -}}
{{- $np := .Values.networkPolicy -}}
# The API server.
- ports:
    {{- range $np.apiServerPorts }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
  {{- with $np.apiServerCidrs }}
  to:
    {{- range . }}
    - ipBlock:
        cidr: {{ . }}
    {{- end }}
  {{- end }}
# The admin endpoints of opted-in pods (the pushes, the check's reads), in the watched namespaces.
- ports:
    {{- range $np.adminPorts }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
  to:
    {{- if .Values.watchNamespaces }}
    - namespaceSelector:
        matchExpressions:
          - key: kubernetes.io/metadata.name
            operator: In
            values:
              {{- toYaml .Values.watchNamespaces | nindent 14 }}
      podSelector:
        matchLabels:
          logpolicy.dev/enabled: "true"
    {{- else }}
    - namespaceSelector: {}
      podSelector:
        matchLabels:
          logpolicy.dev/enabled: "true"
    {{- end }}
{{- end }}
