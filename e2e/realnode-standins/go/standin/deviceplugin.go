package main

// Stand-in for NVIDIA's k8s-device-plugin (`nvidia-device-plugin`), for the real-node lane, where
// there is no GPU.
//
// Contract honoured (states/state-device-plugin/0500_daemonset.yaml): serves the kubelet's device
// plugin API v1beta1 on a socket in /var/lib/kubelet/device-plugins (hostPath), registers the
// resource nvidia.com/gpu with the kubelet at kubelet.sock, ListAndWatch reports one healthy device
// per GPU with the GPU's UUID as its id (DEVICE_ID_STRATEGY=uuid: the fake NVML's UUIDs), and
// Allocate answers NVIDIA_VISIBLE_DEVICES=<uuids> (DEVICE_LIST_STRATEGY=envvar), which the nvidia
// runtime stand-in turns into the driver's libraries in the container. It registers again when
// the kubelet restarts (kubelet.sock recreated, or this plugin's socket removed) and restarts on
// SIGHUP (what config-manager sends it after a config change). With FAIL_ON_INIT_ERROR=true it
// exits 1 when NVML is not there (no libnvidia-ml.so.1 injected or under /driver-root), as NVIDIA's
// does when NVML fails to initialize; otherwise it then waits forever without registering.
// Not emulated: device nodes (PASS_DEVICE_SPECS: there are none), MIG and sharing strategies
// (CONFIG_FILE is read by nobody), CDI, GetPreferredAllocation (not offered).

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const (
	resourceName = "nvidia.com/gpu"
	pluginSocket = "nvidia-gpu.sock"
)

type devicePlugin struct {
	dir    string
	gpus   []gpu
	server *grpc.Server
	stop   chan struct{}
}

func (p *devicePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *devicePlugin) devices() []*pluginapi.Device {
	devs := make([]*pluginapi.Device, 0, len(p.gpus))
	for _, g := range p.gpus {
		devs = append(devs, &pluginapi.Device{ID: g.UUID, Health: pluginapi.Healthy})
	}
	return devs
}

func (p *devicePlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices()}); err != nil {
		return err
	}
	select {
	case <-p.stop:
	case <-s.Context().Done():
	}
	return nil
}

func (p *devicePlugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (p *devicePlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	known := map[string]bool{}
	for _, g := range p.gpus {
		known[g.UUID] = true
	}
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		for _, id := range cr.DevicesIDs {
			if !known[id] {
				return nil, fmt.Errorf("invalid allocation request for %q: unknown device: %s", resourceName, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(cr.DevicesIDs, ",")},
		})
	}
	return resp, nil
}

func (p *devicePlugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// serve starts the plugin's gRPC server on a fresh socket.
func (p *devicePlugin) serve() error {
	sock := filepath.Join(p.dir, pluginSocket)
	if err := os.Remove(sock); err != nil && !os.IsNotExist(err) {
		return err
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	p.stop = make(chan struct{})
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, p)
	go p.server.Serve(l)
	return nil
}

func (p *devicePlugin) halt() {
	if p.server == nil {
		return
	}
	close(p.stop)
	p.server.Stop()
	p.server = nil
	os.Remove(filepath.Join(p.dir, pluginSocket))
}

func (p *devicePlugin) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+filepath.Join(p.dir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     pluginSocket,
		ResourceName: resourceName,
		Options:      &pluginapi.DevicePluginOptions{},
	}, grpc.WaitForReady(true))
	return err
}

// socketID identifies a socket file by inode and change time, so that a recreated one differs.
func socketID(path string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d", st.Ino, st.Ctim.Sec, st.Ctim.Nsec)
}

// runPlugin serves and keeps the plugin registered until ctx ends; restart asks for a restart.
func runPlugin(ctx context.Context, dir string, gpus []gpu, restart <-chan struct{}) error {
	p := &devicePlugin{dir: dir, gpus: gpus}
	defer p.halt()
	kubelet := filepath.Join(dir, "kubelet.sock")
	for {
		registered := ""
		if err := p.serve(); err != nil {
			return fmt.Errorf("serving %s: %w", filepath.Join(dir, pluginSocket), err)
		}
		for registered == "" {
			id := socketID(kubelet)
			if id != "" {
				if err := p.register(ctx); err != nil {
					log.Printf("registering with the kubelet: %v (retrying)", err)
				} else {
					registered = id
					log.Printf("registered %s with %d device(s) on %s: %v", resourceName, len(gpus),
						filepath.Join(dir, pluginSocket), uuids(gpus))
					break
				}
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
		// Watch: a new kubelet.sock (kubelet restart; it also removes our socket) or a restart
		// request.
		again := false
		for !again {
			select {
			case <-ctx.Done():
				return nil
			case <-restart:
				log.Printf("restarting (signal)")
				again = true
			case <-time.After(500 * time.Millisecond):
				if id := socketID(kubelet); id != registered {
					log.Printf("kubelet.sock changed: the kubelet restarted; registering again")
					again = true
				} else if socketID(filepath.Join(dir, pluginSocket)) == "" {
					log.Printf("%s was removed; serving and registering again", pluginSocket)
					again = true
				}
			}
		}
		p.halt()
	}
}

func uuids(gpus []gpu) []string {
	var l []string
	for _, g := range gpus {
		l = append(l, g.UUID)
	}
	return l
}

func runDevicePlugin([]string) error {
	log.Printf("MIG_STRATEGY=%s DEVICE_LIST_STRATEGY=%s DEVICE_ID_STRATEGY=%s", os.Getenv("MIG_STRATEGY"),
		envOr("DEVICE_LIST_STRATEGY", "envvar"), envOr("DEVICE_ID_STRATEGY", "uuid"))
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if lib, ok := driverLibrary(); !ok {
		msg := fmt.Sprintf("failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND (%s missing)", lib)
		if envOr("FAIL_ON_INIT_ERROR", "true") == "true" {
			return fmt.Errorf("%s", msg)
		}
		log.Printf("%s; not a GPU node? waiting forever", msg)
		<-ctx.Done()
		return nil
	}
	restart := make(chan struct{}, 1)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			select {
			case restart <- struct{}{}:
			default:
			}
		}
	}()
	return runPlugin(ctx, envOr("NVIDIA_STANDIN_DP_DIR", pluginapi.DevicePluginPath), gpuList(), restart)
}
