{{- define "clustershard.labels" -}}
app.kubernetes.io/name: clustershard
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: clustershard
{{- end -}}
{{- define "clustershard.selector" -}}
app.kubernetes.io/name: clustershard
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- /* The namespaces kubeconfig Secrets may live in: the release's, then kubeconfigSecretNamespaces. */}}
{{- define "clustershard.secretNamespaces" -}}
{{ join "," (uniq (prepend (.Values.kubeconfigSecretNamespaces | default list) .Release.Namespace)) }}
{{- end -}}
