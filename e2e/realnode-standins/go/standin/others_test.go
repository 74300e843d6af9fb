package main

import (
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDCGMExporter(t *testing.T) {
	srv := httptest.NewServer(dcgmHandler("node-1"))
	defer srv.Close()
	for _, p := range []string{"/health", "/metrics"} {
		resp, err := srv.Client().Get(srv.URL + p)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %v %v", p, err, resp)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if p == "/metrics" {
			s := string(b)
			for _, want := range []string{"# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
				`DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-fa4e0000-0000-4000-8000-000000000001",device="nvidia1",modelName="NVIDIA A100-SXM4-40GB",Hostname="node-1",DCGM_FI_DRIVER_VERSION="550.54.15"} 40960`} {
				if !strings.Contains(s, want) {
					t.Fatalf("metrics lack %q:\n%s", want, s)
				}
			}
		}
	}
}

func TestGFDLabels(t *testing.T) {
	out := filepath.Join(t.TempDir(), "gfd")
	if err := writeLabels(out, gfdLabels(time.Unix(1700000000, 0))); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	for _, want := range []string{"nvidia.com/gpu.count=2\n", "nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB\n",
		"nvidia.com/mig.capable=false\n", "nvidia.com/gfd.timestamp=1700000000\n"} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("labels lack %q:\n%s", want, b)
		}
	}
}

func TestConfigManager(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ts"), []byte("version: v1\n"), 0o644)
	t.Setenv("CONFIG_FILE_SRCDIR", dir)
	t.Setenv("CONFIG_FILE_DST", filepath.Join(dir, "config.yaml"))
	t.Setenv("FALLBACK_STRATEGIES", "empty")
	if err := writeConfig(""); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "config.yaml")); err != nil || st.Size() != 0 {
		t.Fatalf("empty fallback: %v %v", st, err)
	}
	if err := writeConfig("ts"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "config.yaml")); string(b) != "version: v1\n" {
		t.Fatalf("config: %q", b)
	}
	if writeConfig("missing") == nil {
		t.Fatal("a missing config was accepted")
	}
}

func TestMIGOutcome(t *testing.T) {
	if migOutcome("all-disabled") != "success" || migOutcome("all-1g.5gb") != "failed" {
		t.Fatal("MIG outcomes")
	}
}

func TestMPSMountShm(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root (mount)")
	}
	root := t.TempDir()
	t.Setenv("NVIDIA_STANDIN_MPS_ROOT", root)
	shm := filepath.Join(root, "shm")
	if err := runMPS([]string{"mount-shm"}); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	defer syscall.Unmount(shm, syscall.MNT_DETACH)
	if !isMountpoint(shm) {
		t.Fatal("no tmpfs at shm")
	}
	if err := runMPS([]string{"mount-shm"}); err != nil {
		t.Fatalf("second mount-shm: %v", err)
	}
	syscall.Unmount(shm, syscall.MNT_DETACH)
	if isMountpoint(shm) {
		t.Fatal("mount-shm mounted twice")
	}
}

func TestSignalProcessByPath(t *testing.T) {
	// A child whose argv[0] is a command name gets the signal named by a path, as
	// PROCESS_TO_SIGNAL=/usr/bin/mps-control-daemon names the MPS daemon.
	dir := t.TempDir()
	link := filepath.Join(dir, "standin-sleeper")
	if err := os.Symlink("/bin/sleep", link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	time.Sleep(100 * time.Millisecond)
	signalProcess("/usr/bin/standin-sleeper", syscall.SIGTERM)
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("not signalled: %v", err)
	}
}
