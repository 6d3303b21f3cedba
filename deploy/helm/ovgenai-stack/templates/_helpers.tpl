{{/* metadata.namespace (indented for a top-level metadata), only when values pin one: otherwise the release's
   (helm) or kubectl's own. */}}
{{- define "ovgenai.namespace" -}}
{{- with .Values.namespace.name }}
  namespace: {{ . }}
{{- end }}
{{- end -}}

{{/* Labels of a component: (dict "root" $ "name" "llm") */}}
{{- define "ovgenai.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/part-of: ov-genai-chatqna
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
{{- end -}}

{{- define "ovgenai.selector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* An image of this project: (dict "root" $ "name" "llm" "suffix" "") */}}
{{- define "ovgenai.image" -}}
{{- $tag := .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{ printf "%s/%s:%s%s" .root.Values.image.registry .name $tag (.suffix | default "") | quote }}
{{- end -}}

{{/* The API key's Secret and key. */}}
{{- define "ovgenai.apiKeyRef" -}}
{secretKeyRef: {name: {{ include "ovgenai.apiKeySecretName" . }}, key: {{ .Values.apiKey.key }}}}
{{- end -}}

{{/* The Secret the scraper reads the key from, as prometheus-operator's SecretKeySelector. */}}
{{- define "ovgenai.apiKeySecretName" -}}
{{ .Values.apiKey.existingSecret | default .Values.apiKey.secretName }}
{{- end -}}

{{/* Requests == limits (Guaranteed QoS): (dict "cpu" .. "memory" .. "extra" {resource: count}) */}}
{{- define "ovgenai.resources" -}}
{{- $amounts := dict "cpu" (toString .cpu) "memory" (toString .memory) -}}
{{- range $name, $count := (.extra | default dict) }}{{ $_ := set $amounts $name (toString $count) }}{{ end -}}
requests: {{ toJson $amounts }}
limits: {{ toJson $amounts }}
{{- end -}}

{{/* OpenVINO's thread count for a CPU quantity ("2", 2, "1500m"): whole CPUs, at least 1. */}}
{{- define "ovgenai.threads" -}}
{{- $cpu := toString . -}}
{{- if hasSuffix "m" $cpu -}}
{{- max 1 (div (trimSuffix "m" $cpu | atoi) 1000) -}}
{{- else -}}
{{- max 1 (floor (float64 $cpu) | int) -}}
{{- end -}}
{{- end -}}

{{/* The "restricted" Pod Security Standard, and a read-only root file system on top. */}}
{{- define "ovgenai.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 1000
runAsGroup: 1000
fsGroup: 1000
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{- define "ovgenai.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end -}}

{{/* imagePullSecrets (indented for a pod spec), when values name any. */}}
{{- define "ovgenai.pullSecrets" -}}
{{- with .Values.image.pullSecrets }}
      imagePullSecrets: {{ toJson . }}
{{- end }}
{{- end -}}

{{/* The name the HPA asks the custom-metrics API for: the series with '_' for ':' (the adapter rule's `as`). */}}
{{- define "ovgenai.hpaMetric" -}}
{{ .Values.autoscaling.series | replace ":" "_" }}
{{- end -}}

{{/* How many backend replicas can exist, and so how many endpoints the LLM microservice is given. */}}
{{- define "ovgenai.backendSlots" -}}
{{- if .Values.autoscaling.enabled }}{{ .Values.autoscaling.maxReplicas }}{{ else }}{{ .Values.backend.replicas }}{{ end -}}
{{- end -}}

{{/* The init container that prepares the models into the volume, as in the backend and the embedding pods. */}}
{{- define "ovgenai.prepareModels" -}}
- name: prepare-models
  image: {{ include "ovgenai.image" (dict "root" . "name" .Values.models.prepare.image) }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: ["python", "-m", "ovgenai_models", "prepare", "--model_repository_path", "/models"]
  envFrom:
    - configMapRef: {name: ov-genai-models}  # LLM_MODEL_ID, EMBEDDING_MODEL_ID, RERANK_MODEL_ID, ...
  env:
    - {name: HF_HOME, value: /models/.hf-cache}
    - name: HF_TOKEN
      valueFrom: {secretKeyRef: {name: {{ .Values.models.hfTokenSecret.name }}, key: {{ .Values.models.hfTokenSecret.key }}, optional: true}}
  resources:
    {{- include "ovgenai.resources" .Values.models.prepare.resources | nindent 4 }}
  securityContext:  # writable: the volumes below only
    {{- include "ovgenai.containerSecurityContext" . | nindent 4 }}
  volumeMounts:
    - {name: models, mountPath: /models}
    - {name: tmp, mountPath: /tmp}  # export scratch space
    - {name: cache, mountPath: /home/serving/.cache}
{{- end -}}

{{- define "ovgenai.modelsVolume" -}}
- name: models  # written by the init container only; the server mounts it read-only
  persistentVolumeClaim: {claimName: {{ .Values.models.volume.existingClaim | default "models" }}}
{{- end -}}
