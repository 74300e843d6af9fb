package main

// Stand-in for NVIDIA's k8s-mig-manager (`nvidia-mig-manager`), for the real-node lane.
//
// Contract honoured (states/state-mig-manager/0600_daemonset.yaml and the operator's MIG stage,
// controller/src/op_gate.c): watches the node's nvidia.com/mig.config label (through the
// in-cluster API, every 5s) and reports the outcome in nvidia.com/mig.config.state, as NVIDIA's
// does: the stand-in's GPUs are not MIG capable, so "all-disabled" succeeds ("success") and any
// other config fails ("failed"). No label: nothing to do. It never touches GPUs, reboots or
// pauses operands (WITH_REBOOT, WITH_SHUTDOWN_HOST_GPU_CLIENTS are logged only).

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func migOutcome(config string) string {
	if config == "all-disabled" {
		return "success"
	}
	return "failed"
}

func runMIGManager([]string) error {
	node := os.Getenv("NODE_NAME")
	log.Printf("node %s, CONFIG_FILE=%s, WITH_REBOOT=%s, WITH_SHUTDOWN_HOST_GPU_CLIENTS=%s", node,
		os.Getenv("CONFIG_FILE"), os.Getenv("WITH_REBOOT"), os.Getenv("WITH_SHUTDOWN_HOST_GPU_CLIENTS"))
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	kube, err := inCluster()
	if err != nil {
		return err
	}
	for {
		labels, err := kube.nodeLabels(ctx, node)
		if err != nil {
			log.Printf("reading node labels: %v", err)
		} else if cfg, ok := labels["nvidia.com/mig.config"]; ok {
			want := migOutcome(cfg)
			if labels["nvidia.com/mig.config.state"] != want {
				log.Printf("applying MIG config %q: %s (no MIG-capable GPU)", cfg, want)
				if err := kube.setNodeLabels(ctx, node, map[string]*string{"nvidia.com/mig.config.state": &want}); err != nil {
					log.Printf("setting nvidia.com/mig.config.state: %v", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(5 * time.Second):
		}
	}
}
