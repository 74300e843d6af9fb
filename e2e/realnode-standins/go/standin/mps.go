package main

// Stand-in for k8s-device-plugin's MPS control daemon (`mps-control-daemon`), for the real-node
// lane, where there is no GPU and so no MPS.
//
// Contract honoured (states/state-mps-control-daemon/0500_daemonset.yaml): `mps-control-daemon
// mount-shm` (init container, privileged, /mps mounted Bidirectional from /run/nvidia/mps) mounts
// a tmpfs at /mps/shm for MPS clients unless one is mounted there already, and exits 0;
// `mps-control-daemon` runs until SIGTERM, restarting on SIGHUP (config-manager), without starting
// any MPS daemon. NVIDIA_STANDIN_MPS_ROOT overrides /mps, for tests.

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func isMountpoint(dir string) bool {
	var st, parent syscall.Stat_t
	if syscall.Stat(dir, &st) != nil || syscall.Stat(filepath.Dir(dir), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

func runMPS(args []string) error {
	root := envOr("NVIDIA_STANDIN_MPS_ROOT", "/mps")
	if len(args) > 0 && args[0] == "mount-shm" {
		shm := filepath.Join(root, "shm")
		if err := os.MkdirAll(shm, 0o755); err != nil {
			return err
		}
		if isMountpoint(shm) {
			log.Printf("%s is mounted already", shm)
			return nil
		}
		if err := syscall.Mount("tmpfs", shm, "tmpfs", 0, "size=65536k,mode=1777"); err != nil {
			return fmt.Errorf("mounting a tmpfs at %s: %w", shm, err)
		}
		log.Printf("mounted a tmpfs at %s", shm)
		return nil
	}
	if len(args) > 0 {
		return fmt.Errorf("unknown command %q", args[0])
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	log.Printf("no GPU sharing with MPS on this node (stand-in): waiting")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			log.Printf("SIGHUP: config reloaded")
		}
	}
}
