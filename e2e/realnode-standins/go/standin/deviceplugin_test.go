package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// fakeKubelet plays the kubelet's Registration service on dir/kubelet.sock.
type fakeKubelet struct {
	server *grpc.Server
	reqs   chan *pluginapi.RegisterRequest
}

func (k *fakeKubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.reqs <- r
	return &pluginapi.Empty{}, nil
}

func startKubelet(t *testing.T, dir string, reqs chan *pluginapi.RegisterRequest) *fakeKubelet {
	t.Helper()
	sock := filepath.Join(dir, "kubelet.sock")
	os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{server: grpc.NewServer(), reqs: reqs}
	pluginapi.RegisterRegistrationServer(k.server, k)
	go k.server.Serve(l)
	return k
}

func waitRegister(t *testing.T, reqs chan *pluginapi.RegisterRequest) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case r := <-reqs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin did not register")
		return nil
	}
}

func pluginClient(t *testing.T, dir, endpoint string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, endpoint),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

func listDevices(t *testing.T, c pluginapi.DevicePluginClient) []*pluginapi.Device {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := c.ListAndWatch(ctx, &pluginapi.Empty{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return r.Devices
}

func TestDevicePlugin(t *testing.T) {
	dir := t.TempDir()
	reqs := make(chan *pluginapi.RegisterRequest, 4)
	k := startKubelet(t, dir, reqs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	restart := make(chan struct{}, 1)
	go func() { done <- runPlugin(ctx, dir, gpuList(), restart) }()

	r := waitRegister(t, reqs)
	if r.ResourceName != "nvidia.com/gpu" || r.Version != pluginapi.Version || r.Endpoint == "" {
		t.Fatalf("registration: %+v", r)
	}
	c := pluginClient(t, dir, r.Endpoint)
	devs := listDevices(t, c)
	want := []string{"GPU-fa4e0000-0000-4000-8000-000000000000", "GPU-fa4e0000-0000-4000-8000-000000000001"}
	if len(devs) != len(want) {
		t.Fatalf("devices: %v", devs)
	}
	for i, d := range devs {
		if d.ID != want[i] || d.Health != pluginapi.Healthy {
			t.Fatalf("device %d: %+v, want %s healthy", i, d, want[i])
		}
	}
	a, err := c.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIDs: []string{want[1]}}, {DevicesIDs: want}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"]; got != want[1] {
		t.Fatalf("Allocate one: NVIDIA_VISIBLE_DEVICES=%q", got)
	}
	if got := a.ContainerResponses[1].Envs["NVIDIA_VISIBLE_DEVICES"]; got != want[0]+","+want[1] {
		t.Fatalf("Allocate two: NVIDIA_VISIBLE_DEVICES=%q", got)
	}
	if _, err := c.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIDs: []string{"GPU-nope"}}}}); err == nil {
		t.Fatal("Allocate of an unknown device succeeded")
	}

	// Kubelet restart: the kubelet goes, removes every socket in the directory, comes back with a
	// new kubelet.sock; the plugin must register again and serve on its (new) socket.
	k.server.Stop()
	os.Remove(filepath.Join(dir, "kubelet.sock"))
	os.Remove(filepath.Join(dir, r.Endpoint))
	time.Sleep(700 * time.Millisecond)
	startKubelet(t, dir, reqs)
	r2 := waitRegister(t, reqs)
	if r2.ResourceName != "nvidia.com/gpu" {
		t.Fatalf("re-registration: %+v", r2)
	}
	if devs := listDevices(t, pluginClient(t, dir, r2.Endpoint)); len(devs) != 2 {
		t.Fatalf("after re-registration: %v", devs)
	}

	// SIGHUP path (config-manager): restart and register again.
	restart <- struct{}{}
	waitRegister(t, reqs)

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, pluginSocket)); !os.IsNotExist(err) {
		t.Fatalf("plugin socket left behind: %v", err)
	}
}
