// gen writes kubesim's protobuf message tables (e2e/kubesim/ks_proto_tables.c) from the struct
// tags of the k8s.io/api Go types: field numbers, JSON names, omitempty, and whether a field is a
// pointer (written on the wire only when set) or a value (always written).
//
//	cd e2e/protoclient && go run ./gen > ../kubesim/ks_proto_tables.c
package main

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedv1 "k8s.io/api/scheduling/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type root struct {
	gv, kind string
	v        any
}

var roots = []root{
	{"v1", "Pod", corev1.Pod{}}, {"v1", "PodList", corev1.PodList{}},
	{"v1", "Node", corev1.Node{}}, {"v1", "NodeList", corev1.NodeList{}},
	{"v1", "Namespace", corev1.Namespace{}}, {"v1", "NamespaceList", corev1.NamespaceList{}},
	{"v1", "Service", corev1.Service{}}, {"v1", "ServiceList", corev1.ServiceList{}},
	{"v1", "ServiceAccount", corev1.ServiceAccount{}}, {"v1", "ServiceAccountList", corev1.ServiceAccountList{}},
	{"v1", "Secret", corev1.Secret{}}, {"v1", "SecretList", corev1.SecretList{}},
	{"v1", "ConfigMap", corev1.ConfigMap{}}, {"v1", "ConfigMapList", corev1.ConfigMapList{}},
	{"v1", "Event", corev1.Event{}}, {"v1", "EventList", corev1.EventList{}},
	{"v1", "Endpoints", corev1.Endpoints{}}, {"v1", "EndpointsList", corev1.EndpointsList{}},
	{"v1", "PersistentVolumeClaim", corev1.PersistentVolumeClaim{}},
	{"v1", "PersistentVolumeClaimList", corev1.PersistentVolumeClaimList{}},
	{"events.k8s.io/v1", "Event", eventsv1.Event{}}, {"events.k8s.io/v1", "EventList", eventsv1.EventList{}},
	{"apps/v1", "DaemonSet", appsv1.DaemonSet{}}, {"apps/v1", "DaemonSetList", appsv1.DaemonSetList{}},
	{"apps/v1", "Deployment", appsv1.Deployment{}}, {"apps/v1", "DeploymentList", appsv1.DeploymentList{}},
	{"apps/v1", "ReplicaSet", appsv1.ReplicaSet{}}, {"apps/v1", "ReplicaSetList", appsv1.ReplicaSetList{}},
	{"apps/v1", "StatefulSet", appsv1.StatefulSet{}}, {"apps/v1", "StatefulSetList", appsv1.StatefulSetList{}},
	{"apps/v1", "ControllerRevision", appsv1.ControllerRevision{}},
	{"apps/v1", "ControllerRevisionList", appsv1.ControllerRevisionList{}},
	{"rbac.authorization.k8s.io/v1", "Role", rbacv1.Role{}}, {"rbac.authorization.k8s.io/v1", "RoleList", rbacv1.RoleList{}},
	{"rbac.authorization.k8s.io/v1", "RoleBinding", rbacv1.RoleBinding{}},
	{"rbac.authorization.k8s.io/v1", "RoleBindingList", rbacv1.RoleBindingList{}},
	{"rbac.authorization.k8s.io/v1", "ClusterRole", rbacv1.ClusterRole{}},
	{"rbac.authorization.k8s.io/v1", "ClusterRoleList", rbacv1.ClusterRoleList{}},
	{"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", rbacv1.ClusterRoleBinding{}},
	{"rbac.authorization.k8s.io/v1", "ClusterRoleBindingList", rbacv1.ClusterRoleBindingList{}},
	{"node.k8s.io/v1", "RuntimeClass", nodev1.RuntimeClass{}}, {"node.k8s.io/v1", "RuntimeClassList", nodev1.RuntimeClassList{}},
	{"coordination.k8s.io/v1", "Lease", coordv1.Lease{}}, {"coordination.k8s.io/v1", "LeaseList", coordv1.LeaseList{}},
	{"scheduling.k8s.io/v1", "PriorityClass", schedv1.PriorityClass{}},
	{"scheduling.k8s.io/v1", "PriorityClassList", schedv1.PriorityClassList{}},
	{"policy/v1", "Eviction", policyv1.Eviction{}},
	{"authentication.k8s.io/v1", "TokenRequest", authnv1.TokenRequest{}},
	{"authorization.k8s.io/v1", "SelfSubjectAccessReview", authzv1.SelfSubjectAccessReview{}},
	{"authorization.k8s.io/v1", "SubjectAccessReview", authzv1.SubjectAccessReview{}},
	{"apiextensions.k8s.io/v1", "CustomResourceDefinition", apiextv1.CustomResourceDefinition{}},
	{"apiextensions.k8s.io/v1", "CustomResourceDefinitionList", apiextv1.CustomResourceDefinitionList{}},
	{"", "DeleteOptions", metav1.DeleteOptions{}},
	{"v1", "Status", metav1.Status{}},
	{"", "WatchEvent", metav1.WatchEvent{}},
}

// Types with their own encoding in both JSON and protobuf: the C code knows them by name.
var special = map[reflect.Type]string{
	reflect.TypeOf(metav1.Time{}):          "F_TIME",
	reflect.TypeOf(metav1.MicroTime{}):     "F_MICROTIME",
	reflect.TypeOf(metav1.Duration{}):      "F_DURATION",
	reflect.TypeOf(resource.Quantity{}):    "F_QTY",
	reflect.TypeOf(intstr.IntOrString{}):   "F_INTSTR",
	reflect.TypeOf(runtime.RawExtension{}): "F_RAW",
	reflect.TypeOf(metav1.FieldsV1{}):      "F_RAW",
	reflect.TypeOf(apiextv1.JSON{}):        "F_RAW",
}

// Messages whose JSON form is not an object: the C code turns them around.
var shapes = map[reflect.Type]string{
	reflect.TypeOf(apiextv1.JSONSchemaPropsOrArray{}):       "SHAPE_OR_ARRAY",
	reflect.TypeOf(apiextv1.JSONSchemaPropsOrBool{}):        "SHAPE_OR_BOOL",
	reflect.TypeOf(apiextv1.JSONSchemaPropsOrStringArray{}): "SHAPE_OR_STRINGS",
}

type field struct {
	num                      int
	json                     string
	typ                      string
	repeated, ptr, omitempty bool
	signed32                 bool
	msg                      string
	inline                   bool
}

var (
	msgs  = map[reflect.Type]string{}
	order []reflect.Type
	names = map[string]reflect.Type{}
)

func cname(t reflect.Type) string {
	if n, ok := msgs[t]; ok {
		return n
	}
	pkg := t.PkgPath()
	parts := strings.Split(pkg, "/")
	p := parts[len(parts)-2] + parts[len(parts)-1]
	p = strings.NewReplacer(".", "", "-", "").Replace(p)
	n := "M_" + p + "_" + t.Name()
	msgs[t] = n
	return n
}

func visit(t reflect.Type) string {
	if n, ok := msgs[t]; ok {
		return n
	}
	n := cname(t)
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Tag.Get("protobuf") == "" {
			continue
		}
		ft := sf.Type
		for ft.Kind() == reflect.Ptr || ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Map {
			ft = ft.Elem()
			for ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 {
				ft = ft.Elem()
			}
		}
		if ft.Kind() == reflect.Struct {
			if _, ok := special[ft]; !ok {
				visit(ft)
			}
		}
	}
	order = append(order, t)
	return n
}

func scalar(k reflect.Kind) (string, bool) {
	switch k {
	case reflect.String:
		return "F_STRING", false
	case reflect.Bool:
		return "F_BOOL", false
	case reflect.Int32:
		return "F_INT", true
	case reflect.Int64, reflect.Int, reflect.Uint32, reflect.Uint64:
		return "F_INT", false
	case reflect.Float64, reflect.Float32:
		return "F_DOUBLE", false
	}
	panic(fmt.Sprint("unsupported kind ", k))
}

func fields(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		pt := sf.Tag.Get("protobuf")
		if pt == "" {
			continue
		}
		pp := strings.Split(pt, ",")
		num, err := strconv.Atoi(pp[1])
		if err != nil {
			panic(err)
		}
		jt := strings.Split(sf.Tag.Get("json"), ",")
		f := field{num: num, json: jt[0]}
		if f.json == "" || f.json == "-" {
			for _, o := range pp {
				if strings.HasPrefix(o, "name=") {
					f.json = o[5:]
				}
			}
		}
		for _, o := range jt[1:] {
			if o == "omitempty" {
				f.omitempty = true
			}
			if o == "inline" {
				f.inline = true
			}
		}
		ft := sf.Type
		if ft.Kind() == reflect.Ptr {
			f.ptr = true
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8 {
			f.repeated = true
			ft = ft.Elem()
			if ft.Kind() == reflect.Ptr {
				ft = ft.Elem()
			}
		}
		switch {
		case ft.Kind() == reflect.Map:
			vt := ft.Elem()
			switch {
			case vt.Kind() == reflect.String:
				f.typ = "F_MAP_STR"
			case vt.Kind() == reflect.Slice && vt.Elem().Kind() == reflect.Uint8:
				f.typ = "F_MAP_BYTES"
			case vt == reflect.TypeOf(resource.Quantity{}):
				f.typ = "F_MAP_QTY"
			case vt.Kind() == reflect.Slice && vt.Elem().Kind() == reflect.String:
				f.typ = "F_MAP_STRS" // map<string, StringList{items=1}>
			case vt.Kind() == reflect.Struct:
				f.typ = "F_MAP_MSG"
				f.msg = cname(vt)
			default:
				panic(fmt.Sprint("map type ", vt, " in ", t))
			}
		case ft.Kind() == reflect.Slice: // []byte
			f.typ = "F_BYTES"
		case ft.Kind() == reflect.Struct:
			if s, ok := special[ft]; ok {
				f.typ = s
			} else {
				f.typ = "F_MSG"
				f.msg = cname(ft)
			}
		default:
			f.typ, f.signed32 = scalar(ft.Kind())
		}
		out = append(out, f)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].num < out[b].num })
	return out
}

func b(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

func main() {
	for _, r := range roots {
		visit(reflect.TypeOf(r.v))
	}
	w := os.Stdout
	fmt.Fprintln(w, "/* Generated by e2e/protoclient/gen from the k8s.io/api v0.32.2 Go types: do not edit. */")
	fmt.Fprintln(w, "/* clang-format off */")
	fmt.Fprintln(w, "#include \"ks_proto_int.h\"\n\n#include <stddef.h>")
	fmt.Fprintln(w)
	for _, t := range order {
		fmt.Fprintf(w, "static const pmsg %s;\n", msgs[t])
	}
	fmt.Fprintln(w)
	for _, t := range order {
		fs := fields(t)
		n := msgs[t]
		fmt.Fprintf(w, "static const pfield %s_F[] = {\n", n)
		for _, f := range fs {
			m := "NULL"
			if f.msg != "" {
				m = "&" + f.msg
			}
			fmt.Fprintf(w, "    {%d, \"%s\", %s, %s, %s, %s, %s, %s, %s},\n", f.num, f.json, f.typ,
				b(f.repeated), b(f.ptr), b(f.omitempty), b(f.signed32), b(f.inline), m)
		}
		if len(fs) == 0 {
			fmt.Fprintln(w, "    {0, NULL, F_STRING, 0, 0, 0, 0, 0, NULL},")
		}
		fmt.Fprintln(w, "};")
		shape := "SHAPE_OBJECT"
		if s, ok := shapes[t]; ok {
			shape = s
		}
		fmt.Fprintf(w, "static const pmsg %s = {\"%s\", %s_F, %d, %s};\n\n", n, t.Name(), n, len(fs), shape)
	}
	fmt.Fprintln(w, "const ks_proto_kind KS_PROTO_KINDS[] = {")
	for _, r := range roots {
		fmt.Fprintf(w, "    {\"%s\", \"%s\", &%s},\n", r.gv, r.kind, msgs[reflect.TypeOf(r.v)])
	}
	fmt.Fprintln(w, "};")
	fmt.Fprintf(w, "const size_t KS_PROTO_NKINDS = %d;\n", len(roots))
}
