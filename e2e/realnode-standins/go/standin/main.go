// Command standin is one binary for the stand-ins of NVIDIA's Go node components that the
// real-node lane runs where there is no GPU. It is installed under each command name the operand
// DaemonSets (states/*/0500_daemonset.yaml) run and picks the stand-in by the name it was run as:
//
//	nvidia-device-plugin   k8s-device-plugin's plugin (deviceplugin.go)
//	config-manager         k8s-device-plugin's config-manager (configmanager.go)
//	gpu-feature-discovery  GPU feature discovery (gfd.go)
//	dcgm-exporter          DCGM exporter (dcgmexporter.go)
//	nvidia-mig-manager     k8s-mig-manager (migmanager.go)
//	nv-hostengine          DCGM's host engine (hostengine.go)
//	mps-control-daemon     k8s-device-plugin's MPS control daemon (mps.go)
//
// The GPUs they report are the ones the project's fake NVML (controller/validator/tests/
// fakenvml.c), published by the driver stand-in, reports with its defaults (gpus.go).
package main

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
)

var commands = map[string]func(args []string) error{
	"nvidia-device-plugin":  runDevicePlugin,
	"config-manager":        runConfigManager,
	"gpu-feature-discovery": runGFD,
	"dcgm-exporter":         runDCGMExporter,
	"nvidia-mig-manager":    runMIGManager,
	"nv-hostengine":         runHostEngine,
	"mps-control-daemon":    runMPS,
}

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if _, ok := commands[name]; !ok && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	run, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "usage: standin COMMAND (or run as COMMAND): one of "+
			"nvidia-device-plugin, config-manager, gpu-feature-discovery, dcgm-exporter, "+
			"nvidia-mig-manager, nv-hostengine, mps-control-daemon\n")
		os.Exit(64)
	}
	log.SetPrefix(name + " stand-in: ")
	log.SetFlags(log.LstdFlags)
	if err := run(args); err != nil {
		log.Printf("error: %v", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v, ok := os.LookupEnv(k); ok && v != "" {
		return v
	}
	return def
}
