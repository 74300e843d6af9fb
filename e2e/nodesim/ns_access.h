/* ns_access: what the operator's gpu-validator can reach in a container on a real node, from the
 * pod spec alone, as the validator, NVIDIA's container runtime and the kubelet decide it:
 * - through the nvidia runtime (a runtimeClassName, and devices asked for by
 *   NVIDIA_VISIBLE_DEVICES other than void/none, or by requesting an nvidia.com/ resource, whose
 *   allocation sets it) the driver's libraries are injected;
 * - otherwise the validator loads them from GPU_VALIDATOR_LIBNVML / GPU_VALIDATOR_LIBCUDA or from
 *   GPU_VALIDATOR_DRIVER_ROOT, each of which must be inside a volume mounted into the container;
 *   libnvidia-ml.so.1 first in modes driver, toolkit and mig, then libcuda.so.1;
 * - its --status-file in a hostPath directory (which the kubelet creates root-owned, mode 0755)
 *   is writable only as root: the uid is securityContext.runAsUser (container, then pod), else
 *   the image's USER, 1000.
 * Pure; used for init containers (ns_gates.c) and validation pods (ns_operand.c). */
#ifndef NS_ACCESS_H
#define NS_ACCESS_H

#include <jansson.h>
#include <stddef.h>

/* 0 when gpu-validator in container c of pod reaches the driver and its status file; else its
 * exit code (2: no NVIDIA driver, 1: the status file) with its error in msg (without the
 * "gpu-validator: " prefix). */
int ns_validator_access(const json_t *pod, const json_t *c, char *msg, size_t size);

#endif
