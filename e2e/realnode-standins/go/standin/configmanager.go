package main

// Stand-in for k8s-device-plugin's config-manager (`config-manager`), for the real-node lane.
//
// Contract honoured (init container and sidecar of the device plugin and GFD DaemonSets): picks
// the config named by the node's NODE_LABEL (nvidia.com/device-plugin.config, read through the
// in-cluster API), else DEFAULT_CONFIG, from CONFIG_FILE_SRCDIR (the device-plugin-config
// ConfigMap) and writes it to CONFIG_FILE_DST; with no config, FALLBACK_STRATEGIES=empty writes
// an empty file. ONESHOT=true exits after that; otherwise it checks the label every 10s and, on a
// change, rewrites the file and, with SEND_SIGNAL=true, sends SIGNAL (a number) to the process
// named PROCESS_TO_SIGNAL (shareProcessNamespace). When the API cannot be reached the label is
// taken as unset (the real one would retry).

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func pickConfig(ctx context.Context, kube *kubeClient) string {
	if kube != nil {
		labels, err := kube.nodeLabels(ctx, os.Getenv("NODE_NAME"))
		if err != nil {
			log.Printf("reading node labels: %v (taking %s as unset)", err, os.Getenv("NODE_LABEL"))
		} else if v := labels[os.Getenv("NODE_LABEL")]; v != "" {
			return v
		}
	}
	return os.Getenv("DEFAULT_CONFIG")
}

func writeConfig(name string) error {
	dst := os.Getenv("CONFIG_FILE_DST")
	if dst == "" {
		return fmt.Errorf("CONFIG_FILE_DST unset")
	}
	var data []byte
	if name != "" {
		b, err := os.ReadFile(filepath.Join(os.Getenv("CONFIG_FILE_SRCDIR"), name))
		if err != nil {
			return fmt.Errorf("config %q: %w", name, err)
		}
		data = b
	} else if !strings.Contains(os.Getenv("FALLBACK_STRATEGIES"), "empty") {
		return fmt.Errorf("no config selected and no fallback strategy 'empty'")
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	if name == "" {
		log.Printf("no config selected: wrote an empty %s", dst)
	} else {
		log.Printf("wrote config %q to %s", name, dst)
	}
	return nil
}

// signalProcess sends sig to every process whose argv[0] names the program name (a path or a
// command name: base names are compared).
func signalProcess(name string, sig syscall.Signal) {
	name = filepath.Base(name)
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		argv0 := strings.SplitN(string(b), "\x00", 2)[0]
		if filepath.Base(argv0) != name {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		if err := syscall.Kill(pid, sig); err == nil {
			log.Printf("sent signal %d to %s (pid %d)", sig, name, pid)
		}
	}
}

func runConfigManager([]string) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	kube, err := inCluster()
	if err != nil {
		log.Printf("%v: the node label is taken as unset", err)
	}
	current := pickConfig(ctx, kube)
	if err := writeConfig(current); err != nil {
		return err
	}
	if os.Getenv("ONESHOT") == "true" {
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Second):
		}
		next := pickConfig(ctx, kube)
		if next == current {
			continue
		}
		log.Printf("%s changed: %q -> %q", os.Getenv("NODE_LABEL"), current, next)
		if err := writeConfig(next); err != nil {
			log.Printf("%v", err)
			continue
		}
		current = next
		if os.Getenv("SEND_SIGNAL") == "true" {
			n, _ := strconv.Atoi(envOr("SIGNAL", "1"))
			signalProcess(os.Getenv("PROCESS_TO_SIGNAL"), syscall.Signal(n))
		}
	}
}
