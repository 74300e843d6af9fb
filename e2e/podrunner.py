#!/usr/bin/env python3
"""The kubelet's process part for the conformance lane: on the real control plane kwok plays
every node's kubelet but runs nothing, so the pods whose image an image map names (the chart's
operator Deployment and its hook pods) are run here as local processes, as kubesim's --image-map
runs them on the default lane.

  podrunner.py --kubeconfig ADMIN_KUBECONFIG --image-map FILE --logs DIR [--work DIR]

For each such pod, once it is bound and kwok has marked it Running, the runner:
- asks the API server for a token of the pod's ServiceAccount bound to the pod (TokenRequest),
  and writes token, ca.crt and namespace into the pod's service-account directory, exported as
  KC_INCLUSTER_ROOT with KUBERNETES_SERVICE_HOST/PORT: the program authenticates as the pod, and
  the real RBAC decides what it may do;
- builds the container's environment (the map's env, then the container's env: value with $(VAR)
  expansion, fieldRef, configMapKeyRef, secretKeyRef) and its argv (the map's program and
  args_prefix, then command[1:] and args, expanded);
- logs stdout and stderr to DIR/<namespace>_<pod>_<container>.log (the names kubesim uses);
- when the process exits: a pod with restartPolicy Never (or OnFailure and exit 0) gets phase
  Succeeded or Failed and the container's terminated state with its exit code; otherwise the
  process is restarted after a back-off (1 s doubling to 10 s) and restartCount goes up;
- when the pod is deleted or gets a deletionTimestamp: SIGTERM, then SIGKILL after the grace
  period (at most 10 s).
The image map format is kubesim's: `images: [{image: GLOB, program: /abs/path, args_prefix: [..],
env: {K: V}}]`. SIGTERM/SIGINT stop every process the runner started, then the runner."""

import argparse
import base64
import fnmatch
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

q = urllib.parse.quote


def log(msg):
    print(time.strftime("%H:%M:%S ") + msg, file=sys.stderr, flush=True)


class Api:
    """The admin's view of the API server, from a kubeconfig with a token and a CA."""

    def __init__(self, path):
        with open(path) as f:
            cfg = yaml.safe_load(f)
        ctx_name = cfg.get("current-context")
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
        self.server = cluster["server"].rstrip("/")
        if "certificate-authority-data" in cluster:
            self.ca_pem = base64.b64decode(cluster["certificate-authority-data"]).decode()
        else:
            with open(cluster["certificate-authority"]) as f:
                self.ca_pem = f.read()
        self.token = user["token"]
        self.ssl = ssl.create_default_context(cadata=self.ca_pem)
        self.port = urllib.parse.urlsplit(self.server).port or 443

    def call(self, method, path, body=None, ctype="application/json", timeout=30):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data, method=method,
                                     headers={"Authorization": "Bearer " + self.token,
                                              "Content-Type": ctype,
                                              "Accept": "application/json",
                                              "User-Agent": "podrunner/conformance"})
        with urllib.request.urlopen(req, context=self.ssl, timeout=timeout) as r:
            return json.load(r)

    def watch(self, path, rv):
        """Yields watch events until the stream ends."""
        sep = "&" if "?" in path else "?"
        req = urllib.request.Request(
            f"{self.server}{path}{sep}watch=1&allowWatchBookmarks=true&resourceVersion={q(rv)}",
            headers={"Authorization": "Bearer " + self.token, "Accept": "application/json",
                     "User-Agent": "podrunner/conformance"})
        with urllib.request.urlopen(req, context=self.ssl, timeout=300) as r:
            for line in r:
                if line.strip():
                    yield json.loads(line)


def load_image_map(path):
    with open(path) as f:
        doc = yaml.safe_load(f) or {}
    entries = doc.get("images")
    if not isinstance(entries, list):
        sys.exit(f"podrunner: image map {path}: expected a top-level `images:` list")
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not e.get("image") or not str(e.get("program", "")).startswith("/"):
            sys.exit(f"podrunner: image map {path}: images[{i}] needs image (a glob) and program (an absolute path)")
        if not os.access(e["program"], os.X_OK):
            sys.exit(f"podrunner: image map {path}: images[{i}].program: {e['program']} is not executable")
    return entries


def match(entries, image):
    for e in entries:
        if fnmatch.fnmatchcase(image or "", e["image"]):
            return e
    return None


VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(s, env):
    """Kubernetes' $(VAR) expansion: known variables are replaced, $$ escapes, the rest stays."""
    return VAR.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), s)


def field_ref(pod, path):
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.*)'\]", path)
    if m:
        return (meta.get(m.group(1)) or {}).get(m.group(2), "")
    return {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.podIP": status.get("podIP", ""),
        "status.hostIP": status.get("hostIP", ""),
    }.get(path, "")


class Container:
    """One running container of one pod."""

    def __init__(self, runner, pod, spec, entry):
        self.runner, self.entry, self.spec = runner, entry, spec
        self.ns, self.pod = pod["metadata"]["namespace"], pod["metadata"]["name"]
        self.uid = pod["metadata"]["uid"]
        self.name = spec["name"]
        self.restart_policy = pod["spec"].get("restartPolicy", "Always")
        self.grace = min(int(pod["spec"].get("terminationGracePeriodSeconds", 30)), 10)
        self.proc = None
        self.restarts = 0
        self.stopping = False
        self.lock = threading.Lock()
        self.dir = os.path.join(runner.work, f"{self.ns}_{self.pod}_{self.uid[:8]}")
        self.log_path = os.path.join(runner.logs, f"{self.ns}_{self.pod}_{self.name}.log")
        self.argv, self.env = self.build(pod)
        threading.Thread(target=self.supervise, daemon=True).start()

    def build(self, pod):
        api = self.runner.api
        sa_dir = os.path.join(self.dir, "serviceaccount")
        os.makedirs(sa_dir, exist_ok=True)
        sa = pod["spec"].get("serviceAccountName") or "default"
        tr = api.call("POST", f"/api/v1/namespaces/{q(self.ns)}/serviceaccounts/{q(sa)}/token", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600,
                     "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": self.pod, "uid": self.uid}}})
        for name, content in (("token", tr["status"]["token"]), ("ca.crt", api.ca_pem), ("namespace", self.ns)):
            path = os.path.join(sa_dir, name)
            with open(path, "w") as f:
                f.write(content)
            os.chmod(path, 0o600)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOSTNAME": self.pod,
               "HOME": os.environ.get("HOME", "/root")}
        for k in ("TMPDIR", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "KC_LOG_LEVEL"):
            if k in os.environ:
                env[k] = os.environ[k]
        port = str(api.port)
        env.update({"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port,
                    "KUBERNETES_SERVICE_PORT_HTTPS": port, "KUBERNETES_PORT": f"tcp://127.0.0.1:{port}",
                    "KC_INCLUSTER_ROOT": sa_dir})
        for k, v in (self.entry.get("env") or {}).items():
            env[k] = str(v).lower() if isinstance(v, bool) else str(v)
        for e in self.spec.get("env") or []:
            vf = e.get("valueFrom")
            if vf is None:
                env[e["name"]] = expand(e.get("value", ""), env)
            elif "fieldRef" in vf:
                env[e["name"]] = field_ref(pod, vf["fieldRef"]["fieldPath"])
            elif "configMapKeyRef" in vf or "secretKeyRef" in vf:
                secret = "secretKeyRef" in vf
                ref = vf["secretKeyRef" if secret else "configMapKeyRef"]
                kind = "secrets" if secret else "configmaps"
                try:
                    obj = api.call("GET", f"/api/v1/namespaces/{q(self.ns)}/{kind}/{q(ref['name'])}")
                    val = (obj.get("data") or {}).get(ref["key"])
                    if val is not None:
                        env[e["name"]] = base64.b64decode(val).decode() if secret else val
                except urllib.error.HTTPError:
                    if not ref.get("optional"):
                        raise
        argv = [self.entry["program"]] + list(self.entry.get("args_prefix") or [])
        argv += [expand(a, env) for a in (self.spec.get("command") or [])[1:]]
        argv += [expand(a, env) for a in self.spec.get("args") or []]
        return argv, env

    def supervise(self):
        backoff = 1
        while True:
            with self.lock:
                if self.stopping:
                    return
                out = open(self.log_path, "ab")
                self.proc = subprocess.Popen(self.argv, env=self.env, cwd=self.dir, stdout=out,
                                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             start_new_session=True)
                out.close()
            log(f"started {self.ns}/{self.pod}/{self.name} (pid {self.proc.pid}): {' '.join(self.argv)}")
            code = self.proc.wait()
            log(f"{self.ns}/{self.pod}/{self.name} exited with {code}")
            with self.lock:
                if self.stopping:
                    return
            done = self.restart_policy == "Never" or (self.restart_policy == "OnFailure" and code == 0)
            self.report(code, done)
            if done:
                return
            time.sleep(backoff)
            backoff = min(backoff * 2, 10)
            self.restarts += 1

    def report(self, code, done):
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        term = {"exitCode": code if code >= 0 else 128 - code,
                "reason": "Completed" if code == 0 else "Error", "finishedAt": now}
        st = {"name": self.name, "image": self.spec.get("image", ""), "ready": False, "started": False,
              "restartCount": self.restarts + (0 if done else 1), "state": {"terminated": term}}
        if not done:
            st["state"] = {"waiting": {"reason": "CrashLoopBackOff",
                                       "message": f"exited with {term['exitCode']}; restarting"}}
            st["lastState"] = {"terminated": term}
        patch = {"status": {"containerStatuses": [st]}}
        if done:
            patch["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
            patch["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "PodCompleted"},
                                             {"type": "ContainersReady", "status": "False", "reason": "PodCompleted"}]
        try:
            self.runner.api.call("PATCH", f"/api/v1/namespaces/{q(self.ns)}/pods/{q(self.pod)}/status",
                                 patch, ctype="application/strategic-merge-patch+json")
        except urllib.error.HTTPError as e:
            if e.code != 404:
                log(f"reporting {self.ns}/{self.pod}: {e}")

    def stop(self):
        with self.lock:
            self.stopping = True
            p = self.proc
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(self.grace)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        except ProcessLookupError:
            pass


class Runner:
    def __init__(self, args):
        self.api = Api(args.kubeconfig)
        self.images = load_image_map(args.image_map)
        self.logs = os.path.abspath(args.logs)
        self.work = os.path.abspath(args.work or os.path.join(args.logs, "..", "podrunner"))
        os.makedirs(self.logs, exist_ok=True)
        os.makedirs(self.work, exist_ok=True)
        self.pods = {}  # uid -> [Container]

    def sync(self, pod):
        meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
        uid = meta["uid"]
        if meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
            self.forget(uid)
            return
        if uid in self.pods or not spec.get("nodeName") or status.get("phase") != "Running":
            return
        wanted = [(c, match(self.images, c.get("image"))) for c in spec.get("containers") or []]
        wanted = [(c, e) for c, e in wanted if e]
        if not wanted:
            return
        try:
            self.pods[uid] = [Container(self, pod, c, e) for c, e in wanted]
        except Exception as e:  # the next event for this pod tries again
            log(f"cannot start {meta['namespace']}/{meta['name']}: {e}")
            self.pods.pop(uid, None)

    def forget(self, uid):
        for c in self.pods.pop(uid, []):
            threading.Thread(target=c.stop, daemon=True).start()

    def run(self):
        while True:
            try:
                lst = self.api.call("GET", "/api/v1/pods")
                seen = set()
                for pod in lst["items"]:
                    seen.add(pod["metadata"]["uid"])
                    self.sync(pod)
                for uid in list(self.pods):
                    if uid not in seen:
                        self.forget(uid)
                for ev in self.api.watch("/api/v1/pods", lst["metadata"]["resourceVersion"]):
                    if ev["type"] == "ERROR":
                        break
                    if ev["type"] == "BOOKMARK":
                        continue
                    if ev["type"] == "DELETED":
                        self.forget(ev["object"]["metadata"]["uid"])
                    else:
                        self.sync(ev["object"])
            except (OSError, urllib.error.URLError, ValueError) as e:
                log(f"watching pods: {e}; relisting")
                time.sleep(0.5)

    def shutdown(self, *_):
        for uid in list(self.pods):
            for c in self.pods.pop(uid):
                c.stop()
        os._exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--image-map", required=True)
    ap.add_argument("--logs", required=True)
    ap.add_argument("--work")
    r = Runner(ap.parse_args())
    signal.signal(signal.SIGTERM, r.shutdown)
    signal.signal(signal.SIGINT, r.shutdown)
    log(f"running pods of {', '.join(e['image'] for e in r.images)} as local processes")
    r.run()


if __name__ == "__main__":
    main()
