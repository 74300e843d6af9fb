{{/* Names, labels and images shared by the templates. */}}

{{- define "gpu-operator.fullname" -}}
gpu-operator
{{- end -}}

{{- define "gpu-operator.labels" -}}
app.kubernetes.io/name: gpu-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* An image that ships with this chart (operator, validator), as JSON {repository, image,
     version}. Without a version it is this chart's own, at the chart's appVersion: NVIDIA's
     registry (nvcr.io/nvidia...) stands for ghcr.io/gpu-operator and NVIDIA's image name
     gpu-operator (which carries NVIDIA's validator since v25.10) for .name, so NVIDIA's values
     never point at an image that does not exist. With a version it is taken as written. */}}
{{- define "gpu-operator.ownImage" -}}
{{- $v := .values -}}
{{- $out := dict "repository" $v.repository "image" $v.image "version" $v.version -}}
{{- if not $v.version -}}
{{- $_ := set $out "version" .appVersion -}}
{{- if or (not $v.repository) (hasPrefix "nvcr.io/nvidia" $v.repository) -}}
{{- $_ := set $out "repository" "ghcr.io/gpu-operator" -}}
{{- end -}}
{{- if or (not $v.image) (eq $v.image "gpu-operator") -}}
{{- $_ := set $out "image" .name -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* The operator image: repository/image:version. */}}
{{- define "gpu-operator.image" -}}
{{- $i := include "gpu-operator.ownImage" (dict "values" .Values.operator "name" "gpu-operator" "appVersion" .Chart.AppVersion) | fromJson -}}
{{- printf "%s/%s:%s" $i.repository $i.image $i.version -}}
{{- end -}}

{{/* Whether the chart creates the ClusterPolicy: clusterPolicy.create and NVIDIA's deployCR. */}}
{{- define "gpu-operator.createPolicy" -}}
{{- if and .Values.clusterPolicy.create (or (not (hasKey .Values.clusterPolicy "deployCR")) .Values.clusterPolicy.deployCR) -}}
true
{{- end -}}
{{- end -}}

{{/* A config sub-object of a spec section without the chart's keys (create, data) and without
     empty strings (the operator refuses an empty ConfigMap name). */}}
{{- define "gpu-operator.specConfig" -}}
{{- $out := dict -}}
{{- range $k, $v := omit . "create" "data" -}}
{{- if not (and (kindIs "string" $v) (eq $v "")) -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Values the chart refuses with a message rather than ignore. */}}
{{- define "gpu-operator.checks" -}}
{{- if .Values.nfd.nodefeaturerules -}}
{{- fail "nfd.nodefeaturerules=true: NFD rules come with Node Feature Discovery, which this chart does not ship; keep it false" -}}
{{- end -}}
{{- if .Values.platform.openshift -}}
{{- fail "platform.openshift=true: OpenShift is not supported by this chart" -}}
{{- end -}}
{{- /* NVIDIA's features this operator does not implement: accepted while off. */ -}}
{{- if .Values.psp.enabled -}}
{{- fail "psp.enabled=true: PodSecurityPolicy is not supported by this operator (the API is gone since Kubernetes 1.25); use psa.enabled" -}}
{{- end -}}
{{- if .Values.driver.nvidiaDriverCRD.enabled -}}
{{- fail "driver.nvidiaDriverCRD.enabled=true: the NVIDIADriver CRD is not supported by this operator; configure the driver in the driver section" -}}
{{- end -}}
{{- if .Values.gpuCluster.deployCR -}}
{{- fail "gpuCluster.deployCR=true: the GPUCluster (DRA) stack and its draDriver are not supported by this operator" -}}
{{- end -}}
{{- if .Values.kataManager.enabled -}}
{{- fail "kataManager.enabled=true: Kata Containers are not supported by this operator" -}}
{{- end -}}
{{- if and .Values.kataSandboxDevicePlugin.enabled .Values.sandboxWorkloads.enabled (eq (toString .Values.sandboxWorkloads.mode) "kata") -}}
{{- fail "kataSandboxDevicePlugin.enabled=true with sandboxWorkloads.mode=kata: Kata Containers are not supported by this operator" -}}
{{- end -}}
{{- if and .Values.migManager.config.create (eq .Values.migManager.config.name "default-mig-parted-config") -}}
{{- fail "migManager.config.create=true with the name default-mig-parted-config: the operator creates that ConfigMap itself; name yours differently" -}}
{{- end -}}
{{- range $k := list "devicePlugin" "dcgmExporter" "migManager" -}}
{{- $c := (index $.Values $k).config | default dict -}}
{{- if and $c.create (not $c.name) -}}
{{- fail (printf "%s.config.create=true needs %s.config.name: the name of the ConfigMap to create" $k $k) -}}
{{- end -}}
{{- if and $c.create (not $c.data) -}}
{{- fail (printf "%s.config.create=true needs %s.config.data: the ConfigMap's keys" $k $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
