/* ks_types: the built-in served types and the convention their printer columns follow, for the
 * part of the API layer that renders meta.k8s.io Tables (kubectl get). */
#ifndef KS_TYPES_H
#define KS_TYPES_H

#include "ks_store.h"

/* ---- printer columns ---------------------------------------------------------------------
 *
 * ks_rtype.printer_columns is the COMPLETE, ordered list of a type's Table columns, the Name
 * column included (built-ins and CRD types alike: ks_crd_sync puts Name first and, when the CRD
 * gives no columns, Age last, as the API server does). Each element:
 *
 *   {"name": "Ready", "type": "string", "format": "", "description": "...", "priority": 0,
 *    "jsonPath": "<path or @computed>", "default": <JSON value, optional>}
 *
 * columnDefinitions in a Table carry name, type, format, description and priority (not jsonPath
 * nor default). priority > 0 columns are the -o wide ones. A cell is computed as follows:
 *
 *  1. jsonPath starting with '.' is a JSONPath evaluated against the object (first result).
 *     When it yields nothing the cell is "default" when given, else null (kubectl prints
 *     <none>). With type "date" the value (an RFC 3339 timestamp) becomes an age ("5m3s", the
 *     API machinery's HumanDuration), as the CRD table convertor does; "integer", "number",
 *     "boolean" cells are JSON values; "string" cells of a non-string value are its JSON text.
 *
 *  2. jsonPath starting with '@' names a computed value (what kube's printers compute in Go).
 *     Unknown names give a null cell. Ages use HumanDuration; "<none>" is the literal string.
 *     @age                 age of .metadata.creationTimestamp
 *     @created             .metadata.creationTimestamp as is (RBAC and CRD "Created At")
 *     @map:<path>          a string map as "k1=v1,k2=v2" (keys sorted), "<none>" when empty
 *     @selector:<path>     a metav1.LabelSelector as "app=x,tier in (a,b)", "<none>" when empty
 *     @join:<path>         every JSONPath result joined with ",", "<none>" when none
 *                          (e.g. @join:.spec.template.spec.containers[*].image)
 *     @count:<p1>[,<p2>]   integer: the summed sizes (object keys, array items) at the paths
 *     @ratio:<p1>,<p2>     "A/B" of two integers, each 0 when absent (Deployment READY)
 *     @owner               the controller ownerReference as "daemonset.apps/name" (lower-case
 *                          kind, group when not core), "<none>"
 *     @pod.ready           "R/T": ready containerStatuses / spec.containers
 *     @pod.status          kubectl's pod status: "Terminating" when deletionTimestamp is set,
 *                          else the first waiting/terminated container reason, status.reason,
 *                          else status.phase ("Init:0/1", "CrashLoopBackOff", "Running" ...)
 *     @pod.restarts        integer-ish string: summed restartCount, plus " (5m ago)" (age of the
 *                          latest lastState.terminated.finishedAt) when > 0
 *     @pod.readinessgates  "<none>" or "R/T" of spec.readinessGates conditions that are True
 *     @node.status         "Ready" / "NotReady" / "Unknown" from the Ready condition, plus
 *                          ",SchedulingDisabled" when spec.unschedulable
 *     @node.roles          sorted roles from node-role.kubernetes.io/<role> labels (and
 *                          kubernetes.io/role), comma-joined, "<none>"
 *     @node.internalip     first status.addresses of type InternalIP, "<none>"
 *     @node.externalip     first status.addresses of type ExternalIP, "<none>"
 *     @svc.externalip      ClusterIP/NodePort: spec.externalIPs joined or "<none>";
 *                          LoadBalancer: ingress ips/hostnames (+externalIPs) or "<pending>";
 *                          ExternalName: spec.externalName
 *     @svc.ports           "80/TCP,443:30443/TCP" (nodePort shown when set), "<none>"
 *     @endpoints           "10.0.0.1:80,10.0.0.2:80" (first 3, then " + N more..."), "<none>"
 *     @event.lastseen      age of series.lastObservedTime, else lastTimestamp, else eventTime,
 *                          else creationTimestamp ("<unknown>" when none)
 *     @event.firstseen     age of firstTimestamp, else eventTime, else creationTimestamp
 *     @event.object        "pod/name": lower-case involvedObject.kind (or regarding.kind) "/"
 *                          involvedObject.name (or regarding.name)
 *     @event.subobject     involvedObject.fieldPath (or regarding.fieldPath)
 *     @event.source        "component, host" of source (or reportingController,
 *                          reportingInstance); "<none>"
 *     @event.count         integer: count, else series.count, else deprecatedCount, else 1
 *     @binding.role        "ClusterRole/name" from roleRef
 *     @binding.subjects:K  names of subjects of kind K joined with ","; ServiceAccounts as
 *                          "ns/name"
 *     @job.status          "Complete", "Failed", "Suspended", "FailureTarget", "Running" from the
 *                          conditions (first True one of those), else "Running"
 *     @job.completions     "S/C" succeeded/spec.completions ("S/1 of P" when completions is
 *                          unset and parallelism > 1)
 *     @job.duration        status.completionTime (or now) minus status.startTime, as an age;
 *                          "" when not started
 *     @pvc.accessmodes     status.accessModes abbreviated: RWO, ROX, RWX, RWOP (comma-joined)
 *     @quota.request / @quota.limit
 *                          "cpu: 100m/1, memory: 0/1Gi" over status.used / status.hard for the
 *                          request (non "limits.") / "limits." resources
 */

/* The description of the Name column the API server sends (shared by ks_crd.c). */
extern const char KS_NAME_COLUMN_DESC[];
/* The description of the Age column (creationTimestamp's). */
extern const char KS_AGE_COLUMN_DESC[];

#endif
