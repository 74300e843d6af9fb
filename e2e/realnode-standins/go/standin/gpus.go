package main

import (
	"fmt"
	"os"
	"strconv"
)

// The fake NVML's defaults (controller/validator/tests/fakenvml.c): what the driver stand-in's
// libnvidia-ml.so.1 reports to every process that does not set FAKENVML_* itself.
const (
	gpuProduct    = "NVIDIA A100-SXM4-40GB"
	gpuMemoryMiB  = 40960
	driverVersion = "550.54.15"
	defaultGPUs   = 2
	maxGPUs       = 8
)

type gpu struct {
	Index int
	UUID  string
}

// gpuCount: NVIDIA_STANDIN_GPUS, else FAKENVML_GPUS (as the fake NVML reads it), else 2.
func gpuCount() int {
	for _, k := range []string{"NVIDIA_STANDIN_GPUS", "FAKENVML_GPUS"} {
		if v := os.Getenv(k); v != "" {
			if n, err := strconv.Atoi(v); err == nil {
				if n < 0 {
					n = 0
				}
				if n > maxGPUs {
					n = maxGPUs
				}
				return n
			}
		}
	}
	return defaultGPUs
}

// gpuUUID is the fake NVML's nvmlDeviceGetUUID for GPU i.
func gpuUUID(i int) string { return fmt.Sprintf("GPU-fa4e0000-0000-4000-8000-%012d", i) }

func gpuList() []gpu {
	n := gpuCount()
	l := make([]gpu, n)
	for i := range l {
		l[i] = gpu{i, gpuUUID(i)}
	}
	return l
}

// driverLibrary finds libnvidia-ml.so.1 where NVIDIA's components find NVML: injected by the
// nvidia runtime into the container's library path, or under the driver root mounted at
// /driver-root. NVIDIA_STANDIN_LIBNVML (a path) overrides, for tests.
func driverLibrary() (string, bool) {
	paths := []string{"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
		"/driver-root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"}
	if p := os.Getenv("NVIDIA_STANDIN_LIBNVML"); p != "" {
		paths = []string{p}
	}
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, true
		}
	}
	return paths[0], false
}
