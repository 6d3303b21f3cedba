{{/* The chart's name, and the release's prefix of every object name (nameOverride, fullnameOverride): two releases
   in one namespace, or this chart under an umbrella chart, never share an object. */}}
{{- define "ovgenai.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ovgenai.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "ovgenai.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The name of a component's objects: (dict "root" $ "component" "backend"), at most 52 characters (a
   StatefulSet's pods carry a revision label of its name and a hash), the component's suffix always kept. */}}
{{- define "ovgenai.componentName" -}}
{{- $max := sub 52 (add1 (len .component)) | int -}}
{{- printf "%s-%s" (include "ovgenai.fullname" .root | trunc $max | trimSuffix "-") .component -}}
{{- end -}}

{{/* metadata.namespace (indented for a top-level metadata), only when values pin one: otherwise the release's
   (helm) or kubectl's own. */}}
{{- define "ovgenai.namespace" -}}
{{- with .Values.namespace.name }}
  namespace: {{ . }}
{{- end }}
{{- end -}}

{{/* Labels of a component: (dict "root" $ "component" "llm") */}}
{{- define "ovgenai.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ovgenai.selector" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: ov-genai-chatqna
{{- end -}}

{{- define "ovgenai.selector" -}}
{{ include "ovgenai.releaseSelector" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Every pod of this release (the network policies' scope). */}}
{{- define "ovgenai.releaseSelector" -}}
app.kubernetes.io/name: {{ include "ovgenai.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* An image: (dict "root" $ "image" <component's image values>). The registry is global.imageRegistry (an umbrella
   chart's), else the component's own, else image.registry; the tag defaults to the chart's appVersion. */}}
{{- define "ovgenai.image" -}}
{{- $global := .root.Values.global | default dict -}}
{{- $registry := $global.imageRegistry | default .image.registry | default .root.Values.image.registry -}}
{{- $tag := .image.tag | default .root.Chart.AppVersion | toString -}}
{{- if $registry -}}
{{ printf "%s/%s:%s" $registry .image.repository $tag | quote }}
{{- else -}}
{{ printf "%s:%s" .image.repository $tag | quote }}
{{- end -}}
{{- end -}}

{{/* image and imagePullPolicy of a container (indented for a container): (dict "root" $ "image" ...) */}}
{{- define "ovgenai.containerImage" -}}
image: {{ include "ovgenai.image" . }}
imagePullPolicy: {{ .image.pullPolicy | default .root.Values.image.pullPolicy }}
{{- end -}}

{{/* The API key's Secret and key. */}}
{{- define "ovgenai.apiKeyRef" -}}
{secretKeyRef: {name: {{ include "ovgenai.apiKeySecretName" . }}, key: {{ .Values.apiKey.key }}}}
{{- end -}}

{{- define "ovgenai.apiKeySecretName" -}}
{{ .Values.apiKey.existingSecret | default .Values.apiKey.secretName | default (include "ovgenai.componentName" (dict "root" . "component" "api-key")) }}
{{- end -}}

{{- define "ovgenai.modelsConfigName" -}}
{{ include "ovgenai.componentName" (dict "root" . "component" "models") }}
{{- end -}}

{{/* Annotations that change when what a pod reads at start changes (the models it serves, the API key), so that
   `helm upgrade` rolls the pods instead of leaving them on the old values; as JSON, for ovgenai.podMetadata. */}}
{{- define "ovgenai.checksums" -}}
{{- $models := include (print .Template.BasePath "/models-config.yaml") . | sha256sum -}}
{{- merge (dict "checksum/models" $models) (include "ovgenai.apiKeyChecksum" . | fromJson) | toJson -}}
{{- end -}}

{{/* The backend's pods carry this one only: a changed model is swapped in while they serve (models-sync.yaml). */}}
{{- define "ovgenai.apiKeyChecksum" -}}
{{- dict "checksum/api-key" (pick .Values.apiKey "existingSecret" "secretName" "key" "value" | toJson | sha256sum) | toJson -}}
{{- end -}}

{{/* The ServiceAccount every pod runs as: serviceAccount.name, else the one the chart creates, else the
   namespace's "default". */}}
{{- define "ovgenai.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ .Values.serviceAccount.name | default (include "ovgenai.componentName" (dict "root" . "component" "serviceaccount")) }}
{{- else -}}
{{ .Values.serviceAccount.name | default "default" }}
{{- end -}}
{{- end -}}

{{/* A pod's labels and annotations (indented for its metadata): (dict "root" $ "component" "llm" "values" <the
   component's values> "annotations" <the chart's own>). podLabels and podAnnotations are the top-level ones with
   the component's over them key by key; the chart's own (selector labels, checksums) always win. */}}
{{- define "ovgenai.podMetadata" -}}
{{- $own := .values | default dict -}}
{{- $labels := include "ovgenai.labels" (dict "root" .root "component" .component) | fromYaml -}}
{{- $labels = merge $labels (deepCopy ($own.podLabels | default dict)) (deepCopy (.root.Values.podLabels | default dict)) -}}
{{- $annotations := merge (deepCopy (.annotations | default dict)) (deepCopy ($own.podAnnotations | default dict)) (deepCopy (.root.Values.podAnnotations | default dict)) -}}
labels:
  {{- toYaml $labels | nindent 2 }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* What every pod spec shares (indented for a pod spec): (dict "root" $ "component" "backend" "values" <the
   component's values> "spread" <its default topologySpreadConstraints>). The release's ServiceAccount with no API
   token: no pod calls the Kubernetes API. nodeSelector, tolerations, affinity and topologySpreadConstraints: the
   component's, else the top-level one, else the default; a spread constraint without a labelSelector spreads the
   component's own pods. */}}
{{- define "ovgenai.podSpec" -}}
{{- $own := .values | default dict -}}
serviceAccountName: {{ include "ovgenai.serviceAccountName" .root }}
automountServiceAccountToken: false
{{- range $key := list "nodeSelector" "tolerations" "affinity" }}
{{- with get $own $key | default (get $.root.Values $key) }}
{{ $key }}:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- with $own.topologySpreadConstraints | default .root.Values.topologySpreadConstraints | default .spread }}
topologySpreadConstraints:
{{- range . }}
{{- $constraint := deepCopy . }}
{{- if not (hasKey $constraint "labelSelector") }}
{{- $selector := include "ovgenai.selector" (dict "root" $.root "component" $.component) | fromYaml }}
{{- $_ := set $constraint "labelSelector" (dict "matchLabels" $selector) }}
{{- end }}
  - {{ toYaml $constraint | indent 4 | trim }}
{{- end }}
{{- end }}
{{- end -}}

{{/* A container's resources, as given: (dict "resources" <values> "extra" {resource: count}); extra (a GPU) goes to
   both requests and limits. */}}
{{- define "ovgenai.resources" -}}
{{- $resources := deepCopy (.resources | default dict) -}}
{{- range $name, $count := (.extra | default dict) }}
{{- range $side := list "requests" "limits" }}
{{- $_ := set $resources $side (merge (dict $name (toString $count)) (get $resources $side | default dict)) }}
{{- end }}
{{- end -}}
{{ toYaml $resources }}
{{- end -}}

{{/* OpenVINO's thread count for a container's resources: whole CPUs of its limit (else its request), at least 1;
   empty without either. */}}
{{- define "ovgenai.threads" -}}
{{- $cpu := "" -}}
{{- with .limits }}{{ $cpu = toString (.cpu | default "") }}{{ end -}}
{{- if not $cpu }}{{ with .requests }}{{ $cpu = toString (.cpu | default "") }}{{ end }}{{ end -}}
{{- if not $cpu -}}
{{- else if hasSuffix "m" $cpu -}}
{{- max 1 (div (trimSuffix "m" $cpu | atoi) 1000) -}}
{{- else -}}
{{- max 1 (floor (float64 $cpu) | int) -}}
{{- end -}}
{{- end -}}

{{/* The proxies every container is given, init and test containers included (env list items, none without a proxy;
   call sites indent them only when there are some: `with include ...`):
   proxy.* values, else global.proxy.* (an umbrella chart's), else OPEA's global.http_proxy, https_proxy, no_proxy.
   no_proxy keeps yours and adds the cluster's own names, which the services call each other by. */}}
{{- define "ovgenai.proxyEnv" -}}
{{- $global := .Values.global | default dict -}}
{{- $globalProxy := $global.proxy | default dict -}}
{{- $http := .Values.proxy.httpProxy | default $globalProxy.httpProxy | default $global.http_proxy | default "" -}}
{{- $https := .Values.proxy.httpsProxy | default $globalProxy.httpsProxy | default $global.https_proxy | default "" -}}
{{- $no := .Values.proxy.noProxy | default $globalProxy.noProxy | default $global.no_proxy | default "" -}}
{{- if or $http $https -}}
{{- $own := list "localhost" "127.0.0.1" ".svc" ".cluster.local" -}}
{{- range $component := list "backend" "llm" "embedding" "gateway" "chroma" -}}
{{- $own = append $own (include "ovgenai.componentName" (dict "root" $ "component" $component)) -}}
{{- end -}}
{{- $values := dict "http_proxy" $http "https_proxy" $https "no_proxy" (join "," (compact (concat (splitList "," $no) $own))) -}}
{{- range $name := list "http_proxy" "https_proxy" "no_proxy" -}}
{{- with get $values $name }}
- {name: {{ $name }}, value: {{ . | quote }}}
- {name: {{ upper $name }}, value: {{ . | quote }}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The CORS allow-list every service takes (indented for an env list). */}}
{{- define "ovgenai.originsEnv" -}}
{{- with .Values.allowedOrigins -}}
- {name: ALLOWED_ORIGINS, value: {{ join "," . | quote }}}
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

{{/* imagePullSecrets (indented for a pod spec), from image.pullSecrets and global.imagePullSecrets. */}}
{{- define "ovgenai.pullSecrets" -}}
{{- $global := .Values.global | default dict -}}
{{- $secrets := concat (.Values.image.pullSecrets | default list) ($global.imagePullSecrets | default list) -}}
{{- with $secrets }}
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
{{- $prepare := .Values.models.prepare -}}
- name: prepare-models
  {{- /* the image with the conversion tools only when asked for: a Transformers checkpoint among the models */}}
  {{- include "ovgenai.containerImage" (dict "root" . "image" (ternary $prepare.exportImage $prepare.image $prepare.exportTools)) | nindent 2 }}
  # --serve_only: the LLM becomes the one the repository's config.json lists, which the backend serves.
  command: ["python", "-m", "ovgenai_models", "prepare", "--model_repository_path", "/models", "--serve_only"]
  envFrom:
    - configMapRef: {name: {{ include "ovgenai.modelsConfigName" . }}}  # LLM_MODEL_ID, EMBEDDING_MODEL_ID, ...
  env:
    - {name: HF_HOME, value: /models/.hf-cache}
    - name: HF_TOKEN
      valueFrom: {secretKeyRef: {name: {{ .Values.models.hfTokenSecret.name }}, key: {{ .Values.models.hfTokenSecret.key }}, optional: true}}
    {{- with include "ovgenai.proxyEnv" . }}{{ . | trim | nindent 4 }}{{ end }}
  resources:
    {{- include "ovgenai.resources" (dict "resources" .Values.models.prepare.resources) | nindent 4 }}
  securityContext:  # writable: the volumes below only
    {{- include "ovgenai.containerSecurityContext" . | nindent 4 }}
  volumeMounts:
    - {name: models, mountPath: /models}
    - {name: tmp, mountPath: /tmp}  # export scratch space
    - {name: cache, mountPath: /home/serving/.cache}
{{- end -}}

{{- define "ovgenai.modelsVolume" -}}
- name: models  # written by the containers that prepare models only; the servers mount it read-only
  persistentVolumeClaim: {claimName: {{ .Values.models.volume.existingClaim | default (include "ovgenai.modelsConfigName" .) }}}
{{- end -}}

{{/* A service's in-cluster URL: (dict "root" $ "component" "llm" "port" 9000) */}}
{{- define "ovgenai.url" -}}
{{ printf "http://%s:%v" (include "ovgenai.componentName" .) .port }}
{{- end -}}
