package main

// Stand-in for NVIDIA's GPU feature discovery (`gpu-feature-discovery`), for the real-node lane.
//
// Contract honoured (states/gpu-feature-discovery/0500_daemonset.yaml): writes NVIDIA's GPU labels
// for the node as an NFD feature file (GFD_OUTPUT_FILE, default
// /etc/kubernetes/node-feature-discovery/features.d/gfd, "label=value" lines, written atomically)
// for NFD's worker to turn into node labels, and rewrites it every GFD_SLEEP_INTERVAL (default
// 60s, with a fresh nvidia.com/gfd.timestamp) or on SIGHUP (config-manager); GFD_ONESHOT=true
// writes once and exits. The labels describe the fake NVML's GPUs (no MIG: mig.capable=false).
// With GFD_FAIL_ON_INIT_ERROR=true it exits 1 when NVML is not there. On SIGTERM it removes the
// file, as NVIDIA's does.

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"
)

func gfdLabels(now time.Time) map[string]string {
	v := strings.SplitN(driverVersion, ".", 3)
	for len(v) < 3 {
		v = append(v, "0")
	}
	return map[string]string{
		"nvidia.com/gfd.timestamp":                fmt.Sprint(now.Unix()),
		"nvidia.com/gpu.count":                    fmt.Sprint(gpuCount()),
		"nvidia.com/gpu.product":                  strings.ReplaceAll(gpuProduct, " ", "-"),
		"nvidia.com/gpu.memory":                   fmt.Sprint(gpuMemoryMiB),
		"nvidia.com/gpu.family":                   "ampere",
		"nvidia.com/gpu.compute.major":            "8",
		"nvidia.com/gpu.compute.minor":            "0",
		"nvidia.com/gpu.machine":                  "standin",
		"nvidia.com/gpu.mode":                     "compute",
		"nvidia.com/gpu.replicas":                 "1",
		"nvidia.com/gpu.sharing-strategy":         "none",
		"nvidia.com/mig.capable":                  "false",
		"nvidia.com/mig.strategy":                 envOr("MIG_STRATEGY", "single"),
		"nvidia.com/mps.capable":                  "false",
		"nvidia.com/cuda.driver-version.full":     driverVersion,
		"nvidia.com/cuda.driver-version.major":    v[0],
		"nvidia.com/cuda.driver-version.minor":    v[1],
		"nvidia.com/cuda.driver-version.revision": v[2],
		"nvidia.com/cuda.driver.major":            v[0],
		"nvidia.com/cuda.driver.minor":            v[1],
		"nvidia.com/cuda.driver.rev":              v[2],
		"nvidia.com/cuda.runtime-version.full":    "12.4",
		"nvidia.com/cuda.runtime-version.major":   "12",
		"nvidia.com/cuda.runtime-version.minor":   "4",
		"nvidia.com/cuda.runtime.major":           "12",
		"nvidia.com/cuda.runtime.minor":           "4",
	}
}

func writeLabels(path string, labels map[string]string) error {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, labels[k])
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func runGFD([]string) error {
	out := envOr("GFD_OUTPUT_FILE", "/etc/kubernetes/node-feature-discovery/features.d/gfd")
	interval, err := time.ParseDuration(envOr("GFD_SLEEP_INTERVAL", "60s"))
	if err != nil || interval <= 0 {
		return fmt.Errorf("GFD_SLEEP_INTERVAL: %q is not a duration", os.Getenv("GFD_SLEEP_INTERVAL"))
	}
	if lib, ok := driverLibrary(); !ok {
		msg := fmt.Sprintf("failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND (%s missing)", lib)
		if envOr("GFD_FAIL_ON_INIT_ERROR", "true") == "true" {
			return fmt.Errorf("%s", msg)
		}
		log.Printf("%s: writing no labels", msg)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	for {
		if _, ok := driverLibrary(); ok {
			if err := writeLabels(out, gfdLabels(time.Now())); err != nil {
				return err
			}
			log.Printf("wrote %d labels to %s", len(gfdLabels(time.Now())), out)
		}
		if os.Getenv("GFD_ONESHOT") == "true" {
			return nil
		}
		select {
		case <-ctx.Done():
			os.Remove(out)
			log.Printf("removed %s", out)
			return nil
		case <-hup:
			log.Printf("SIGHUP: relabelling")
		case <-time.After(interval):
		}
	}
}
