package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/loadproof/loadproof/internal/keycastserver"
	"github.com/loadproof/loadproof/internal/keycastserver/kctest"
	"github.com/loadproof/loadproof/internal/kube"
	"github.com/loadproof/loadproof/internal/testwait"
)

// TestKubeIndexedJobEmulated renders the manifests of a 3-worker run against real NATS, then plays
// the kubelet: it starts the worker Job's command line once per completion index with
// JOB_COMPLETION_INDEX set and the Secret's values in the environment, and the coordinator Job's
// command line in its working directory. The merged result must hold every segment, and be priced
// over every pod: each worker's --worker-cost-per-hour and the coordinator's own.
func TestKubeIndexedJobEmulated(t *testing.T) {
	if testing.Short() {
		t.Skip("emulates a Kubernetes indexed job with worker processes (-short)")
	}
	srv := kctest.Start(t, keycastserver.Config{})
	users := kcUsers(t, srv.URL, 3)
	url, token := externalNATS(t)
	name := fmt.Sprintf("kube%d", time.Now().UnixNano())
	work := t.TempDir()
	manifests := filepath.Join(work, "run.yaml")
	code, errs := umbrella(context.Background(), t, "kube", "manifests", "--workers", "3", "--image", "loadproof:test", "--nats", url,
		"--name", name, "--nats-token", token, "--secret", "s3cret", "-o", manifests,
		"--worker-cost-per-hour", "0.5USD", "--coordinator-cost-per-hour", "0.25USD", "--",
		"keycast", "run", "--url", srv.URL, "--users-file", users, "-d", "0", "-n", "301", "-c", "3", "-m", "get-public-key", "--ramp-up", "0", "-o", "merged.json")
	if code != ExitOK {
		t.Fatalf("kube manifests exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(manifests)
	if err != nil {
		t.Fatal(err)
	}
	var workers, coordinator batchv1.Job
	var secret corev1.Secret
	for _, doc := range kube.SplitDocuments(b) {
		switch {
		case strings.Contains(string(doc), "kind: Secret"):
			err = yaml.UnmarshalStrict(doc, &secret)
		case strings.Contains(string(doc), "name: "+name+"-workers"):
			err = yaml.UnmarshalStrict(doc, &workers)
		case strings.Contains(string(doc), "name: "+name+"-coordinator"):
			err = yaml.UnmarshalStrict(doc, &coordinator)
		default:
			t.Fatalf("unexpected object with --nats given:\n%s", doc)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	env := func(ctr corev1.Container, extra ...string) []string {
		e := os.Environ()
		for _, v := range ctr.Env {
			switch {
			case v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil:
				e = append(e, v.Name+"="+secret.StringData[v.ValueFrom.SecretKeyRef.Key])
			case v.ValueFrom == nil:
				e = append(e, v.Name+"="+v.Value)
			}
		}
		return append(e, extra...)
	}
	wctr := workers.Spec.Template.Spec.Containers[0]
	if wctr.Command[0] != "loadproof" {
		t.Fatalf("worker command %q", wctr.Command)
	}
	var werr safeBuf
	for i := range int(*workers.Spec.Completions) {
		c := exec.Command(os.Args[0], wctr.Command[1:]...)
		c.Env = env(wctr, fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i), fmt.Sprintf("HOSTNAME=%s-workers-%d", name, i),
			"LOADPROOF_TASK_FILES="+filepath.Dir(users)) // the pod's /config
		c.Stderr = &werr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Process.Kill()
			testwait.Call(t, testwait.Long, "the killed worker's exit", func() { _ = c.Wait() })
		})
	}
	cctr := coordinator.Spec.Template.Spec.Containers[0]
	results := filepath.Join(work, "results") // the Job's /results
	if err := os.MkdirAll(results, 0o755); err != nil {
		t.Fatal(err)
	}
	co := exec.Command(os.Args[0], cctr.Command[1:]...)
	co.Dir, co.Env = results, env(cctr)
	out, err := co.CombinedOutput()
	if err != nil {
		t.Fatalf("coordinator Job: %v\n%s\nworkers:\n%s", err, out, werr.String())
	}
	m := readResults(t, filepath.Join(results, "merged.json"))
	if m.Summary.TotalRequests != 301 || len(m.Segments) != 3 {
		t.Fatalf("merged: %d requests over %d segments; want 301 over 3", m.Summary.TotalRequests, len(m.Segments))
	}
	for i, s := range m.Segments {
		if s.Count != 3 {
			t.Errorf("segment %d: %v", i, s)
		}
	}
	if c := m.Cost; c == nil || c.Currency != "USD" || c.Load == nil || !slices.Equal(c.Load.PerHour, []float64{0.5, 0.5, 0.5, 0.25}) {
		t.Errorf("merged cost %+v; want the load side priced at 0.5 USD per worker and 0.25 for the coordinator", c)
	}
	if _, err := os.Stat(filepath.Join(results, "merged.json.coordination.json")); err != nil {
		t.Error(err)
	}
}
