package main

// Stand-in for NVIDIA's DCGM exporter (nvcr.io/nvidia/k8s/dcgm-exporter, run by its image's
// entrypoint), for the real-node lane.
//
// Contract honoured (states/state-dcgm-exporter/0600_daemonset.yaml): listens on
// DCGM_EXPORTER_LISTEN (":9400"), answers the liveness/readiness probes' GET /health with 200,
// and serves GET /metrics in Prometheus' text format with DCGM's gauges per GPU
// (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_FB_FREE, DCGM_FI_DEV_GPU_TEMP,
// DCGM_FI_DEV_POWER_USAGE, DCGM_FI_DEV_SM_CLOCK), labelled as DCGM exporter labels them (gpu,
// UUID, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION). Values are fixed, idle-GPU values.
// Not emulated: pod attribution through pod-resources (DCGM_EXPORTER_KUBERNETES), the collectors
// file.

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

var dcgmGauges = []struct {
	name, help string
	value      func(g gpu) float64
}{
	{"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", func(gpu) float64 { return 0 }},
	{"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", func(gpu) float64 { return 0 }},
	{"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", func(gpu) float64 { return gpuMemoryMiB }},
	{"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", func(g gpu) float64 { return float64(30 + g.Index) }},
	{"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", func(g gpu) float64 { return 50.5 + float64(g.Index) }},
	{"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", func(gpu) float64 { return 210 }},
}

func dcgmMetrics(host string) string {
	var b strings.Builder
	for _, m := range dcgmGauges {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", m.name, m.help, m.name)
		for _, g := range gpuList() {
			fmt.Fprintf(&b, "%s{gpu=\"%d\",UUID=\"%s\",device=\"nvidia%d\",modelName=\"%s\",Hostname=\"%s\",DCGM_FI_DRIVER_VERSION=\"%s\"} %g\n",
				m.name, g.Index, g.UUID, g.Index, gpuProduct, host, driverVersion, m.value(g))
		}
	}
	return b.String()
}

func dcgmHandler(host string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		fmt.Fprintln(w, "OK")
	})
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		fmt.Fprint(w, dcgmMetrics(host))
	})
	return mux
}

func runDCGMExporter([]string) error {
	host := envOr("NODE_NAME", "")
	if host == "" {
		host, _ = os.Hostname()
	}
	addr := envOr("DCGM_EXPORTER_LISTEN", ":9400")
	srv := &http.Server{Addr: addr, Handler: dcgmHandler(host), ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	go func() {
		<-ctx.Done()
		srv.Shutdown(context.Background())
	}()
	log.Printf("serving /metrics and /health on %s for %d GPU(s)", addr, gpuCount())
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		return err
	}
	return nil
}
