// client drives an API server the way controller-runtime does for built-in kinds: client-go with
// ContentType application/vnd.kubernetes.protobuf and Accept "protobuf, json". For a DaemonSet, a
// RuntimeClass, a ClusterRole and a core/v1 Event it creates, gets, lists, watches (a change and
// the delete) and deletes, printing what it saw in a form that does not depend on the server
// (no uids, resourceVersions or times), and the media types of the answers. kubesim and the
// real kube-apiserver must print the same.
//
//	client KUBECONFIG NAMESPACE
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// media records the Content-Type of every answer, by method.
type media struct {
	mu   sync.Mutex
	seen map[string]bool
	next http.RoundTripper
}

func (m *media) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := m.next.RoundTrip(req)
	if err == nil {
		ct := resp.Header.Get("Content-Type")
		m.mu.Lock()
		m.seen[req.Method+" "+ct] = true
		m.mu.Unlock()
	}
	return resp, err
}

func die(what string, err error) {
	fmt.Fprintf(os.Stderr, "FAIL %s: %v\n", what, err)
	os.Exit(1)
}

type kind struct {
	name    string
	path    string // the object's URL path, for the byte comparison
	create  func() (runtime.Object, error)
	get     func() (runtime.Object, error)
	list    func() (int, error)
	watch   func(rv string) (watch.Interface, error)
	change  func() error
	del     func() error
	summary func(runtime.Object) string
}

func main() {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Args[1])
	if err != nil {
		die("kubeconfig", err)
	}
	ns := os.Args[2]
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	rec := &media{seen: map[string]bool{}}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec }
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		die("client", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	byName := func(n string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", n).String()}
	}
	labels := map[string]string{"app": "pbclient"}

	ds := cs.AppsV1().DaemonSets(ns)
	rcs := cs.NodeV1().RuntimeClasses()
	crs := cs.RbacV1().ClusterRoles()
	evs := cs.CoreV1().Events(ns)
	kinds := []kind{
		{
			name: "DaemonSet", path: "/apis/apps/v1/namespaces/" + ns + "/daemonsets/pbclient-ds",
			create: func() (runtime.Object, error) {
				return ds.Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "pbclient-ds", Labels: labels},
					Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
						Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
							Containers: []corev1.Container{{Name: "c", Image: "registry.example/pb:1",
								Resources:    corev1.ResourceRequirements{Limits: corev1.ResourceList{"memory": resource.MustParse("64Mi")}},
								VolumeMounts: []corev1.VolumeMount{{Name: "run", MountPath: "/run/x"}}}},
							Volumes:      []corev1.Volume{{Name: "run", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/run/x"}}}},
							NodeSelector: map[string]string{"pbclient": "none"},
							Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}}}}, metav1.CreateOptions{})
			},
			get:  func() (runtime.Object, error) { return ds.Get(ctx, "pbclient-ds", metav1.GetOptions{}) },
			list: func() (int, error) { l, err := ds.List(ctx, byName("pbclient-ds")); return lenOr(l, err) },
			watch: func(rv string) (watch.Interface, error) {
				o := byName("pbclient-ds")
				o.ResourceVersion = rv
				return ds.Watch(ctx, o)
			},
			change: func() error {
				o, err := ds.Get(ctx, "pbclient-ds", metav1.GetOptions{})
				if err == nil {
					o.Labels["changed"] = "yes"
					_, err = ds.Update(ctx, o, metav1.UpdateOptions{})
				}
				return err
			},
			del: func() error { return ds.Delete(ctx, "pbclient-ds", metav1.DeleteOptions{}) },
			summary: func(o runtime.Object) string {
				d := o.(*appsv1.DaemonSet)
				c := d.Spec.Template.Spec.Containers[0]
				return fmt.Sprintf("labels=%s image=%s memory=%s mount=%s hostPath=%s strategy=%s maxUnavailable=%s revisionHistoryLimit=%d gen=%d",
					kv(d.Labels), c.Image, c.Resources.Limits.Memory(), c.VolumeMounts[0].MountPath,
					d.Spec.Template.Spec.Volumes[0].HostPath.Path, d.Spec.UpdateStrategy.Type,
					d.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable, *d.Spec.RevisionHistoryLimit, d.Generation)
			},
		},
		{
			name: "RuntimeClass", path: "/apis/node.k8s.io/v1/runtimeclasses/pbclient-rc",
			create: func() (runtime.Object, error) {
				return rcs.Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "pbclient-rc", Labels: labels}, Handler: "nvidia",
					Overhead:   &nodev1.Overhead{PodFixed: corev1.ResourceList{"cpu": resource.MustParse("250m")}},
					Scheduling: &nodev1.Scheduling{NodeSelector: map[string]string{"nvidia.com/gpu.present": "true"}}}, metav1.CreateOptions{})
			},
			get:  func() (runtime.Object, error) { return rcs.Get(ctx, "pbclient-rc", metav1.GetOptions{}) },
			list: func() (int, error) { l, err := rcs.List(ctx, byName("pbclient-rc")); return lenOr(l, err) },
			watch: func(rv string) (watch.Interface, error) {
				o := byName("pbclient-rc")
				o.ResourceVersion = rv
				return rcs.Watch(ctx, o)
			},
			change: func() error {
				o, err := rcs.Get(ctx, "pbclient-rc", metav1.GetOptions{})
				if err == nil {
					o.Labels["changed"] = "yes"
					_, err = rcs.Update(ctx, o, metav1.UpdateOptions{})
				}
				return err
			},
			del: func() error { return rcs.Delete(ctx, "pbclient-rc", metav1.DeleteOptions{}) },
			summary: func(o runtime.Object) string {
				r := o.(*nodev1.RuntimeClass)
				return fmt.Sprintf("labels=%s handler=%s overhead.cpu=%s nodeSelector=%s", kv(r.Labels), r.Handler,
					r.Overhead.PodFixed.Cpu(), kv(r.Scheduling.NodeSelector))
			},
		},
		{
			name: "ClusterRole", path: "/apis/rbac.authorization.k8s.io/v1/clusterroles/pbclient-cr",
			create: func() (runtime.Object, error) {
				return crs.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pbclient-cr", Labels: labels},
					Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"get", "list", "watch"}},
						{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
			},
			get:  func() (runtime.Object, error) { return crs.Get(ctx, "pbclient-cr", metav1.GetOptions{}) },
			list: func() (int, error) { l, err := crs.List(ctx, byName("pbclient-cr")); return lenOr(l, err) },
			watch: func(rv string) (watch.Interface, error) {
				o := byName("pbclient-cr")
				o.ResourceVersion = rv
				return crs.Watch(ctx, o)
			},
			change: func() error {
				o, err := crs.Get(ctx, "pbclient-cr", metav1.GetOptions{})
				if err == nil {
					o.Labels["changed"] = "yes"
					_, err = crs.Update(ctx, o, metav1.UpdateOptions{})
				}
				return err
			},
			del: func() error { return crs.Delete(ctx, "pbclient-cr", metav1.DeleteOptions{}) },
			summary: func(o runtime.Object) string {
				r := o.(*rbacv1.ClusterRole)
				return fmt.Sprintf("labels=%s rules=%v", kv(r.Labels), r.Rules)
			},
		},
		{
			name: "Event", path: "/api/v1/namespaces/" + ns + "/events/pbclient-ev",
			create: func() (runtime.Object, error) {
				t := metav1.NewTime(time.Date(2025, 3, 1, 12, 30, 0, 0, time.UTC))
				return evs.Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "pbclient-ev", Labels: labels},
					InvolvedObject: corev1.ObjectReference{Kind: "DaemonSet", Namespace: ns, Name: "pbclient-ds", APIVersion: "apps/v1"},
					Reason:         "Created", Message: "created by the protobuf client", Type: corev1.EventTypeNormal, Count: 1,
					FirstTimestamp: t, LastTimestamp: t, Source: corev1.EventSource{Component: "pbclient"}}, metav1.CreateOptions{})
			},
			get:  func() (runtime.Object, error) { return evs.Get(ctx, "pbclient-ev", metav1.GetOptions{}) },
			list: func() (int, error) { l, err := evs.List(ctx, byName("pbclient-ev")); return lenOr(l, err) },
			watch: func(rv string) (watch.Interface, error) {
				o := byName("pbclient-ev")
				o.ResourceVersion = rv
				return evs.Watch(ctx, o)
			},
			change: func() error {
				o, err := evs.Get(ctx, "pbclient-ev", metav1.GetOptions{})
				if err == nil {
					o.Count = 2
					o.Labels["changed"] = "yes"
					_, err = evs.Update(ctx, o, metav1.UpdateOptions{})
				}
				return err
			},
			del: func() error { return evs.Delete(ctx, "pbclient-ev", metav1.DeleteOptions{}) },
			summary: func(o runtime.Object) string {
				e := o.(*corev1.Event)
				return fmt.Sprintf("labels=%s involved=%s/%s reason=%s count=%d first=%s type=%s source=%s", kv(e.Labels),
					e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Count,
					e.FirstTimestamp.UTC().Format(time.RFC3339), e.Type, e.Source.Component)
			},
		},
	}
	for _, k := range kinds {
		o, err := k.create()
		if err != nil {
			die(k.name+" create", err)
		}
		fmt.Printf("%s create: %s\n", k.name, k.summary(o))
		o, err = k.get()
		if err != nil {
			die(k.name+" get", err)
		}
		m := o.(metav1.Object)
		fmt.Printf("%s get: %s name=%s uid-set=%v\n", k.name, k.summary(o), m.GetName(), m.GetUID() != "")
		n, err := k.list()
		if err != nil {
			die(k.name+" list", err)
		}
		fmt.Printf("%s list: %d\n", k.name, n)
		fmt.Printf("%s bytes: object %s, list %s\n", k.name, sameBytes(cfg, k.path),
			sameBytes(cfg, k.path[:strings.LastIndex(k.path, "/")]+"?fieldSelector=metadata.name%3D"+m.GetName()))
		w, err := k.watch(m.GetResourceVersion())
		if err != nil {
			die(k.name+" watch", err)
		}
		if err := k.change(); err != nil {
			die(k.name+" update", err)
		}
		if err := k.del(); err != nil {
			die(k.name+" delete", err)
		}
		// Controllers may write too (a DaemonSet's status): what must be seen is the update, then
		// the delete as the last event, and nothing but MODIFIED before it.
		updated, deleted, other := false, false, []string{}
		timeout := time.After(20 * time.Second)
	events:
		for !deleted {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					break events
				}
				mo, isObj := ev.Object.(metav1.Object)
				switch {
				case ev.Type == watch.Deleted && isObj && mo.GetName() != "":
					deleted = true
				case ev.Type == watch.Modified && isObj:
					updated = updated || mo.GetLabels()["changed"] == "yes"
				default:
					other = append(other, string(ev.Type))
				}
			case <-timeout:
				break events
			}
		}
		w.Stop()
		fmt.Printf("%s watch: update seen=%v, then DELETED=%v, other events=%v\n", k.name, updated, deleted, other)
		if _, err := k.get(); apierrors.IsNotFound(err) {
			fmt.Printf("%s get after delete: NotFound (%s)\n", k.name, apierrors.ReasonForError(err))
		} else {
			// A DaemonSet with dependents may still be there a moment: wait for it to go.
			deadline := time.Now().Add(20 * time.Second)
			for err == nil && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
				_, err = k.get()
			}
			fmt.Printf("%s get after delete: NotFound=%v\n", k.name, apierrors.IsNotFound(err))
		}
	}
	if len(os.Args) > 3 {
		rawChecks(cfg, os.Args[3])
	}
	var cts []string
	for s := range rec.seen {
		cts = append(cts, s)
	}
	sort.Strings(cts)
	fmt.Printf("answers: %s\n", strings.Join(cts, "; "))
}

func lenOr(l runtime.Object, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return meta.LenList(l), nil
}

// sameBytes compares the server's protobuf answer for path with what apimachinery's protobuf
// serializer writes for the server's JSON answer of the same resourceVersion: kubesim's encoder
// must write the bytes a real API server writes for the object it holds.
func sameBytes(cfg *rest.Config, path string) string {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		die("http client", err)
	}
	get := func(accept string) []byte {
		req, _ := http.NewRequest("GET", strings.TrimRight(cfg.Host, "/")+path, nil)
		req.Header.Set("Accept", accept)
		resp, err := hc.Do(req)
		if err != nil {
			die("GET "+path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			die("GET "+path, fmt.Errorf("%d %s", resp.StatusCode, b))
		}
		return b
	}
	ser := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	for try := 0; try < 20; try++ {
		pb := get("application/vnd.kubernetes.protobuf")
		js := get("application/json")
		// A controller may write in between: compare answers of one version only.
		if !bytes.Equal(pb, get("application/vnd.kubernetes.protobuf")) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		obj, err := runtime.Decode(scheme.Codecs.UniversalDeserializer(), js)
		if err != nil {
			die("decode "+path, err)
		}
		var want bytes.Buffer
		if err := ser.Encode(obj, &want); err != nil {
			die("encode "+path, err)
		}
		if bytes.Equal(pb, want.Bytes()) {
			return "same bytes as the Go serializer"
		}
		i := 0
		for i < len(pb) && i < want.Len() && pb[i] == want.Bytes()[i] {
			i++
		}
		return fmt.Sprintf("DIFFERENT from the Go serializer (%d vs %d bytes, first difference at %d)", len(pb), want.Len(), i)
	}
	return "never stable"
}

// rawChecks asks for the CRD named crd and its custom resources with several Accept headers and
// prints the status and media type of each answer (and a 406's message).
func rawChecks(cfg *rest.Config, crd string) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		die("http client", err)
	}
	plural, group, _ := strings.Cut(crd, ".")
	for _, c := range []struct{ path, accept string }{
		{"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + crd, "application/vnd.kubernetes.protobuf, application/json"},
		{"/apis/" + group + "/v1/" + plural, "application/vnd.kubernetes.protobuf, application/json"},
		{"/apis/" + group + "/v1/" + plural, "application/vnd.kubernetes.protobuf"},
		{"/apis/node.k8s.io/v1/runtimeclasses", "application/vnd.kubernetes.protobuf;q=0.5, application/json"},
		{"/apis/node.k8s.io/v1/runtimeclasses", "application/json;q=0.5, application/vnd.kubernetes.protobuf"},
		{"/apis/node.k8s.io/v1/runtimeclasses/nosuch", "application/vnd.kubernetes.protobuf"},
	} {
		req, _ := http.NewRequest("GET", strings.TrimRight(cfg.Host, "/")+c.path, nil)
		req.Header.Set("Accept", c.accept)
		var body []byte
		var resp *http.Response
		// A new CRD's storage may still be starting: the real server answers 429 a moment.
		for try := 0; ; try++ {
			if resp, err = hc.Do(req); err != nil {
				die("GET "+c.path, err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests || try == 50 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		line := fmt.Sprintf("raw GET %s [%s]: %d %s", strings.Replace(c.path, crd, "CRD", 1), c.accept, resp.StatusCode, resp.Header.Get("Content-Type"))
		if resp.StatusCode >= 400 {
			// The Status, in whichever encoding it came.
			if obj, err := runtime.Decode(scheme.Codecs.UniversalDeserializer(), body); err == nil {
				if st, ok := obj.(*metav1.Status); ok {
					line += fmt.Sprintf(" reason=%s code=%d message=%q", st.Reason, st.Code, st.Message)
				}
			} else {
				line += " undecodable: " + err.Error()
			}
		}
		fmt.Println(line)
	}
}

func kv(m map[string]string) string {
	var ks []string
	for k, v := range m {
		ks = append(ks, k+"="+v)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}
