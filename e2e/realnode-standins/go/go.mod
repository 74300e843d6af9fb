// Stand-ins for NVIDIA's Go node components (device plugin, config-manager, GFD, DCGM exporter,
// MIG manager, DCGM host engine) used by the real-node lane, where there is no GPU.
module gpu-operator.local/e2e/realnode-standins

go 1.23.0

require (
	google.golang.org/grpc v1.65.0
	k8s.io/kubelet v0.32.2
)

require (
	github.com/gogo/protobuf v1.3.2 // indirect
	golang.org/x/net v0.30.0 // indirect
	golang.org/x/sys v0.26.0 // indirect
	golang.org/x/text v0.19.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20240826202546-f6391c0de4c7 // indirect
	google.golang.org/protobuf v1.35.1 // indirect
)
