{{/* SPDX-License-Identifier: Apache-2.0 */}}

{{/* The chart's short name: nameOverride, else "harp". */}}
{{- define "harp.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Object names: fullnameOverride, else "<release>-harp", or the release name alone when it already
says harp (a release called "harp" gets "harp", not "harp-harp"). 63 is the DNS label limit.
*/}}
{{- define "harp.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "harp.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "harp.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels the DaemonSet selects its pods by; they must never change between upgrades. */}}
{{- define "harp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "harp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "harp.labels" -}}
{{ include "harp.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: node-agent
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "harp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "harp.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- define "harp.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/*
harp-attach's options, as a YAML list, for `run` (deploy interface: options come before the
subcommand). Helm reads numbers from values files as floats and prints a large one as 1e+06,
so each goes through int64; every argument is quoted, since a command line is strings.
*/}}
{{- define "harp.attachOptions" -}}
- --queues
- {{ .Values.queues | int64 | quote }}
- --port-base
- {{ .Values.portBase | int64 | quote }}
- --port-count
- {{ .Values.portCount | int64 | quote }}
- --frame-count
- {{ .Values.frameCount | int64 | quote }}
- --hugepages
{{- if kindIs "string" .Values.hugepages }}
- {{ .Values.hugepages | quote }}
{{- else }}
- {{ .Values.hugepages | int64 | quote }}
{{- end }}
- --xdp-mode
- {{ .Values.xdpMode | quote }}
- --family
- {{ .Values.family | quote }}
{{- end -}}

{{/* run's options for the node agent: its socket in the /run/harp mount, or none. */}}
{{- define "harp.agentOptions" -}}
- --agent-socket
{{- if .Values.agent.enabled }}
- "/run/harp/agent.sock"
{{- range .Values.agent.allowUids }}
- --allow-uid
- {{ . | int64 | quote }}
{{- end }}
{{- else }}
- "off"
{{- end }}
{{- end -}}

{{/* The interfaces, one list item each, for run, down and status alike. */}}
{{- define "harp.interfaceArgs" -}}
{{- range $i, $name := .Values.interfaces }}
{{- if $i }}{{ "\n" }}{{ end }}- {{ $name | quote }}
{{- end }}
{{- end -}}
