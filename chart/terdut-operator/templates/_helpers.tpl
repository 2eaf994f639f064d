{{/* The chart's name, or nameOverride (the app.kubernetes.io/name label). */}}
{{- define "terdut-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The name of every object: fullnameOverride, else the release name when it already contains the
chart's name (`helm install terdut-operator ...` gives "terdut-operator", not
"terdut-operator-terdut-operator"), else release-name.
*/}}
{{- define "terdut-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "terdut-operator.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "terdut-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "terdut-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Every object's labels: the selector labels, the chart's, then commonLabels. */}}
{{- define "terdut-operator.labels" -}}
{{ include "terdut-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
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
the owners' finalizers). A server-side apply of an object that does not exist yet is authorized
as create as well as patch, so the applied kinds have both. Nothing is updated whole: writes are patches (server-side apply,
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
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, create, update, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [acid.zalan.do]
  resources: [postgresqls]
  verbs: [get]
- apiGroups: [postgresql.cnpg.io]
  resources: [clusters]
  verbs: [get]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{/*
The namespaces the operator watches with rbac.namespaced (docs/design.md §9, §13): watchNamespaces plus
the release namespace (where terdutServer.enabled puts its TerdutServer), comma-separated.
Fails the render when the list is empty: a namespaced operator that watches nothing is a mistake.
*/}}
{{- define "terdut-operator.watchNamespaces" -}}
{{- if not .Values.rbac.watchNamespaces -}}
{{- fail "rbac.namespaced=true needs rbac.watchNamespaces: the namespaces the operator may act in (e.g. --set 'rbac.watchNamespaces={team-a,team-b}')" -}}
{{- end -}}
{{- append .Values.rbac.watchNamespaces .Release.Namespace | uniq | join "," -}}
{{- end -}}

{{/*
topologySpreadConstraints with the operator's own pods as the default labelSelector: values
cannot name the selector labels (they depend on the release), so a constraint without a
labelSelector spreads this release's pods.
*/}}
{{- define "terdut-operator.topologySpreadConstraints" -}}
{{- $selector := include "terdut-operator.selectorLabels" . | fromYaml -}}
{{- range .Values.topologySpreadConstraints }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" $selector) }}
{{- end }}
- {{ toYaml $c | nindent 2 | trim }}
{{- end }}
{{- end -}}

{{/*
The label matchers that pick this release's scrape targets in the alert rules: by default what
the Prometheus operator sets for the chart's ServiceMonitor (job = the metrics Service's name,
namespace = the release's); prometheusRule.selector replaces it for other scrape setups.
*/}}
{{- define "terdut-operator.metricsSelector" -}}
{{- if .Values.prometheusRule.selector -}}
{{- .Values.prometheusRule.selector -}}
{{- else -}}
job="{{ include "terdut-operator.fullname" . }}-metrics",namespace="{{ .Release.Namespace }}"
{{- end -}}
{{- end -}}

{{/*
extraArgs and extraEnv must not repeat what the chart sets: the operator refuses a flag given
twice (so the pod would crash-loop), and a second POD_NAME would change its Lease identity.
*/}}
{{- define "terdut-operator.checkExtras" -}}
{{- $flags := list "--http-addr" "--resync" "--api-timeout" "--max-concurrent-reconciles" "--server-url-template" "--cluster-domain" "--leader-elect" "--lease-name" "--log-format" "--log-level" "--watch-namespaces" "--selector" "--watch-namespace-selector" "--passivate-after" -}}
{{- range .Values.extraArgs -}}
{{- $flag := regexReplaceAll "=.*$" (toString .) "" -}}
{{- if has $flag $flags -}}
{{- fail (printf "extraArgs: %s is set by the chart; set its value instead (docs/configuration.md)" $flag) -}}
{{- end -}}
{{- end -}}
{{- range .Values.extraEnv -}}
{{- if has .name (list "POD_NAME" "POD_NAMESPACE") -}}
{{- fail (printf "extraEnv: %s is set by the chart" .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
