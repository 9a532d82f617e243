{{- define "clustershard.labels" -}}
app.kubernetes.io/name: clustershard
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: clustershard
{{- end -}}
{{- define "clustershard.selector" -}}
app.kubernetes.io/name: clustershard
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
