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
  roles (weight -1) before the pod (weight 0); all deleted once the check ran, passed or
  failed: no role of the check outlives it. A failed check's report is printed by helm
  before its pod goes (hook-output-log-policy, Helm 4; with Helm 3, `helm test --logs`).
*/}}
{{- define "logpolicy-operator.checkHook" -}}
helm.sh/hook: test
helm.sh/hook-weight: {{ . | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded,hook-failed
{{- end }}

{{/*
  The namespaces `helm test` checks, as a list: tests.namespaces, else watchNamespaces;
  empty: every namespace.
*/}}
{{- define "logpolicy-operator.checkNamespaces" -}}
{{- toJson (.Values.tests.namespaces | default .Values.watchNamespaces | default list) }}
{{- end }}

{{/*
  What `kubectl logpolicy check` reads in each namespace it checks. The pod proxy
  (`pods/proxy` reaches any port of any pod of the namespace) only where the namespaces
  are named (`proxy` true): cluster-wide, the check reads each pod's admin endpoint at
  its IP instead.
*/}}
{{- define "logpolicy-operator.checkRules" -}}
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
{{- if .proxy }}
- apiGroups: [""]
  resources: ["pods/proxy"]
  verbs: ["get"]
{{- end }}
- apiGroups: [""]
  resources: ["configmaps"]
  resourceNames: ["logpolicy-trust"]
  verbs: ["get"]
{{- end }}
