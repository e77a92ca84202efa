{{/* The name of `helm test`'s check pod and of its ServiceAccount and roles. */}}
{{- define "logpolicy-operator.checkName" -}}
{{- printf "%s-check" (include "logpolicy-operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
  The labels that select the check pod: not the operator's selector labels, so that
  neither the operator's Service, PodDisruptionBudget and NetworkPolicy nor its
  topology spread constraints count the pod.
*/}}
{{- define "logpolicy-operator.checkSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-check" (include "logpolicy-operator.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The labels of the check's objects. */}}
{{- define "logpolicy-operator.checkLabels" -}}
helm.sh/chart: {{ include "logpolicy-operator.chart" . }}
{{ include "logpolicy-operator.checkSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: check
app.kubernetes.io/part-of: logpolicy
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
  The annotations of the check's objects: `helm test` hooks, the ServiceAccount and its
  roles (weight -1) before the pod (weight 0); all deleted once the check passed, kept
  after a failure (for `kubectl logs`) until the next `helm test`.
*/}}
{{- define "logpolicy-operator.checkHook" -}}
helm.sh/hook: test
helm.sh/hook-weight: {{ . | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}

{{/* What `kubectl logpolicy check` reads in each namespace it checks. */}}
{{- define "logpolicy-operator.checkRules" -}}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["pods/proxy"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["configmaps"]
  resourceNames: ["logpolicy-trust"]
  verbs: ["get"]
{{- end }}
