{{- define "terdut-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "terdut-operator.selectorLabels" -}}
app.kubernetes.io/name: terdut-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "terdut-operator.labels" -}}
{{ include "terdut-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "terdut-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "terdut-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The rules the operator needs (DESIGN §9), shared by the ClusterRole and the Roles. */}}
{{- define "terdut-operator.rules" -}}
- apiGroups: [terdut.ryuvia.com]
  resources: [terdutservers, terdutteams, terdutalertsources]
  verbs: [get, list, watch, patch, update]
- apiGroups: [terdut.ryuvia.com]
  resources: [terdutservers/status, terdutteams/status, terdutalertsources/status]
  verbs: [get, patch, update]
- apiGroups: [terdut.ryuvia.com]
  resources: [terdutteams/finalizers, terdutalertsources/finalizers, terdutservers/finalizers]
  verbs: [update]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [""]
  resources: [services, secrets]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [acid.zalan.do]
  resources: [postgresqls]
  verbs: [get, list, watch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{/*
The namespaces the operator watches with rbac.namespaced (DESIGN §9, §13): watchNamespaces plus
the release namespace (where terdutServer.enabled puts its TerdutServer), comma-separated.
Fails the render when the list is empty: a namespaced operator that watches nothing is a mistake.
*/}}
{{- define "terdut-operator.watchNamespaces" -}}
{{- if not .Values.rbac.watchNamespaces -}}
{{- fail "rbac.namespaced=true needs rbac.watchNamespaces: the namespaces the operator may act in (e.g. --set 'rbac.watchNamespaces={team-a,team-b}')" -}}
{{- end -}}
{{- append .Values.rbac.watchNamespaces .Release.Namespace | uniq | join "," -}}
{{- end -}}
