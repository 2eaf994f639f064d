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

{{/*
The ServiceAccount the operator runs as. With serviceAccount.create=false a name is required:
falling back to "default" would bind the operator's ClusterRole (Secrets in every namespace) to
the account every pod of the release namespace gets.
*/}}
{{- define "terdut-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "terdut-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.create=false needs serviceAccount.name: the existing ServiceAccount the operator runs as (binding its rights to \"default\" would give them to every pod of the namespace)" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The rules the operator needs (docs/design.md §9), shared by the ClusterRole and the Roles:
exactly the verbs its identity used in the project's test run, read from the kube-apiserver's
audit log (`rbac-audit`, docs/security.md), plus what OwnerReferencesPermissionEnforcement
checks inside a create or apply that sets ownerReferences (delete on the owned kinds, update on
the owners' finalizers). Nothing is updated whole: writes are patches (server-side apply,
merge patches of status and finalizers); the only update is of a webhook Secret the operator
controls, when it rotates the key.
*/}}
{{- define "terdut-operator.rules" -}}
- apiGroups: [terdut.ryuvia.com]
  resources: [terdutteams, terdutalertsources]
  verbs: [get, list, watch, patch]
- apiGroups: [terdut.ryuvia.com]
  resources: [terdutservers]
  verbs: [get, list, watch]
- apiGroups: [terdut.ryuvia.com]
  resources: [terdutservers/status, terdutteams/status, terdutalertsources/status]
  verbs: [patch]
- apiGroups: [terdut.ryuvia.com]
  resources: [terdutservers/finalizers, terdutalertsources/finalizers]
  verbs: [update]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, patch, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, patch, delete]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, patch, delete]
- apiGroups: [acid.zalan.do]
  resources: [postgresqls]
  verbs: [get]
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
