package main

// A minimal in-cluster Kubernetes API client (service account token, CA), enough for node labels.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

type kubeClient struct {
	base, token string
	http        *http.Client
}

func inCluster() (*kubeClient, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, fmt.Errorf("not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset)")
	}
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &kubeClient{
		base:  "https://" + net.JoinHostPort(host, port),
		token: string(bytes.TrimSpace(token)),
		http: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool}}},
	}, nil
}

func (k *kubeClient) do(ctx context.Context, method, path, ctype string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, k.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+k.token)
	req.Header.Set("Accept", "application/json")
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := k.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

func (k *kubeClient) nodeLabels(ctx context.Context, node string) (map[string]string, error) {
	b, err := k.do(ctx, http.MethodGet, "/api/v1/nodes/"+node, "", nil)
	if err != nil {
		return nil, err
	}
	var n struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	return n.Metadata.Labels, nil
}

// setNodeLabels merges labels into the node's (a nil value removes the label).
func (k *kubeClient) setNodeLabels(ctx context.Context, node string, labels map[string]*string) error {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	_, err := k.do(ctx, http.MethodPatch, "/api/v1/nodes/"+node, "application/merge-patch+json", body)
	return err
}
