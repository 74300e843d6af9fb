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

{{/* The operator image: repository/image:version (version defaults to appVersion). */}}
{{- define "gpu-operator.image" -}}
{{- $o := .Values.operator -}}
{{- printf "%s/%s:%s" $o.repository $o.image (default .Chart.AppVersion $o.version) -}}
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
{{- if .Values.nfd.enabled -}}
{{- fail "nfd.enabled=true: this chart does not ship Node Feature Discovery; install NFD separately (GPU nodes need its feature.node.kubernetes.io/pci-10de.present label) and keep nfd.enabled=false" -}}
{{- end -}}
{{- if .Values.nfd.nodefeaturerules -}}
{{- fail "nfd.nodefeaturerules=true: NFD rules come with Node Feature Discovery, which this chart does not ship; keep it false" -}}
{{- end -}}
{{- if .Values.platform.openshift -}}
{{- fail "platform.openshift=true: OpenShift is not supported by this chart" -}}
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
