{{/* The chart's name. */}}
{{- define "lnet-router.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of the release's objects; group objects add a suffix to it, so it is
kept short. */}}
{{- define "lnet-router.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "lnet-router.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select every router pod of the release, whatever its group. */}}
{{- define "lnet-router.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lnet-router.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "lnet-router.labels" -}}
helm.sh/chart: {{ include "lnet-router.chart" . }}
{{ include "lnet-router.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "lnet-router.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "lnet-router.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "lnet-router.fullname" .)) .Values.tls.secretName }}
{{- end }}

{{/* The Secret holding the tokens file, or nothing when there are no tokens. */}}
{{- define "lnet-router.tokensSecretName" -}}
{{- if .Values.tokens.existingSecret }}
{{- .Values.tokens.existingSecret }}
{{- else if .Values.tokens.entries }}
{{- printf "%s-tokens" (include "lnet-router.fullname" .) }}
{{- end }}
{{- end }}

{{- define "lnet-router.tokensKey" -}}
{{- if .Values.tokens.existingSecret }}{{ .Values.tokens.key }}{{ else }}tokens{{ end }}
{{- end }}

{{/* The tokens file written from tokens.entries: one `NAME ROLE SECRET` line each. */}}
{{- define "lnet-router.tokensFile" -}}
{{- range .Values.tokens.entries }}
{{- printf "%s %s %s\n" .name .role .secret }}
{{- end }}
{{- end }}

{{/*
The configuration groups, as YAML {groups: [...]}: one DaemonSet and ConfigMap each.
Each group has
  group:    its name (the lnet-router/config-group label of its pods),
  name:     the name of its DaemonSet and ConfigMap,
  config:   the configuration text,
  affinity: the node selector terms that give it its nodes, or nothing (every router node).
Precedence: a node named in config.nodes, then the first of config.nodeGroups whose label
matches, then the default. Each group excludes the nodes of the groups before it, so the
groups never share a node.
*/}}
{{- define "lnet-router.groups" -}}
{{- $full := include "lnet-router.fullname" . }}
{{- $nodes := keys .Values.config.nodes | sortAlpha }}
{{- $groups := list }}
{{- range $node := $nodes }}
{{- $short := $node | lower | replace "." "-" | trunc 30 | trimSuffix "-" }}
{{- $group := printf "node-%s-%s" $short (sha256sum $node | trunc 6) }}
{{- $term := dict "matchFields" (list (dict "key" "metadata.name" "operator" "In" "values" (list $node))) }}
{{- $groups = append $groups (dict "group" $group "name" (printf "%s-%s" $full $group) "config" (get $.Values.config.nodes $node) "affinity" (list $term)) }}
{{- end }}
{{- $excluded := list }}
{{- $names := list }}
{{- range $g := .Values.config.nodeGroups }}
{{- if has $g.name $names }}
{{- fail (printf "config.nodeGroups: the name %q is used twice" $g.name) }}
{{- end }}
{{- $names = append $names $g.name }}
{{- $exprs := prepend $excluded (dict "key" $g.key "operator" "In" "values" $g.values) }}
{{- $term := dict "matchExpressions" $exprs }}
{{- if $nodes }}
{{- $_ := set $term "matchFields" (list (dict "key" "metadata.name" "operator" "NotIn" "values" $nodes)) }}
{{- end }}
{{- $groups = append $groups (dict "group" $g.name "name" (printf "%s-%s" $full $g.name) "config" $g.config "affinity" (list $term)) }}
{{- $excluded = append $excluded (dict "key" $g.key "operator" "NotIn" "values" $g.values) }}
{{- end }}
{{- $default := dict "group" "default" "name" $full "config" .Values.config.default }}
{{- if or $nodes $excluded }}
{{- $term := dict }}
{{- if $excluded }}
{{- $_ := set $term "matchExpressions" $excluded }}
{{- end }}
{{- if $nodes }}
{{- $_ := set $term "matchFields" (list (dict "key" "metadata.name" "operator" "NotIn" "values" $nodes)) }}
{{- end }}
{{- $_ := set $default "affinity" (list $term) }}
{{- end }}
{{- $groups = prepend $groups $default }}
{{- dict "groups" $groups | toYaml }}
{{- end }}
