package kube

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the rendered YAML; run go test ./internal/kube -update and review the diff", path)
	}
}

// decodeStrict decodes every document of a stream into the official type its kind names, refusing
// unknown fields, and returns them by kind and name.
func decodeStrict(t *testing.T, b []byte) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, doc := range SplitDocuments(b) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatal(err)
		}
		var obj interface{ GetName() string }
		switch tm.APIVersion + "/" + tm.Kind {
		case "v1/Secret":
			obj = &corev1.Secret{}
		case "v1/Service":
			obj = &corev1.Service{}
		case "apps/v1/Deployment":
			obj = &appsv1.Deployment{}
		case "batch/v1/Job":
			obj = &batchv1.Job{}
		default:
			t.Fatalf("unexpected object %s %s", tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s does not decode strictly: %v\n%s", tm.Kind, err, doc)
		}
		out[tm.Kind+"/"+obj.GetName()] = obj
	}
	return out
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"deployed-nats.golden.yaml", Config{Workers: 4, Image: "registry.local/loadproof:dev", Token: "tok", Secret: "sec",
			AntiAffinity: "required", CPU: "2", Memory: "1Gi", ConfigSecret: "loadproof-config", AllowHost: "keycast.staging.test",
			Client: []string{"keycast", "run", "--url", "http://keycast.staging.test:3000", "--users-file", "/config/users.json", "-o", "results.json"}},
			[]string{"Secret/loadproof-secrets", "Service/loadproof-nats", "Deployment/loadproof-nats", "Job/loadproof-workers", "Job/loadproof-coordinator"}},
		{"external-nats.golden.yaml", Config{Name: "run7", Namespace: "load", Workers: 2, Image: "loadproof:1", NATS: "nats://nats.infra:4222",
			Token: "tok", Secret: "sec", AntiAffinity: "preferred", PortRange: "-",
			Client: []string{"keycast", "capacity", "--plan", "/config/plan.json", "--output", "evidence"}},
			[]string{"Secret/run7-secrets", "Job/run7-workers", "Job/run7-coordinator"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Render(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, b)
			objs := decodeStrict(t, b)
			var kinds []string
			for k := range objs {
				kinds = append(kinds, k)
			}
			for _, k := range tc.want {
				if objs[k] == nil {
					t.Errorf("missing %s (have %v)", k, kinds)
				}
			}
			if len(objs) != len(tc.want) {
				t.Errorf("%d objects; want %d", len(objs), len(tc.want))
			}
			cfg := tc.cfg
			_ = cfg.normalize()
			w := objs["Job/"+cfg.Name+"-workers"].(*batchv1.Job)
			s := w.Spec
			if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion || *s.Completions != int32(cfg.Workers) || *s.Parallelism != int32(cfg.Workers) {
				t.Errorf("worker Job is not Indexed with %d completions and parallelism: %+v", cfg.Workers, s)
			}
			ctr := s.Template.Spec.Containers[0]
			if !slices.ContainsFunc(ctr.Env, func(e corev1.EnvVar) bool {
				return e.Name == "JOB_COMPLETION_INDEX" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil
			}) {
				t.Error("worker pods do not get JOB_COMPLETION_INDEX")
			}
			sc := s.Template.Spec.SecurityContext
			if cfg.PortRange != "-" && (sc == nil || len(sc.Sysctls) != 1 || sc.Sysctls[0].Name != "net.ipv4.ip_local_port_range") {
				t.Errorf("worker pods lack the port-range sysctl: %+v", sc)
			}
			if s.Template.Spec.Affinity == nil || s.Template.Spec.Affinity.PodAntiAffinity == nil {
				t.Error("worker pods lack the anti-affinity")
			}
		})
	}
}

func TestRenderRefusesBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Workers: 2, Image: "x", Token: "t", Secret: "s"},
		{Workers: 2, Image: "x", Token: "t", Secret: "s", Client: []string{"keycast", "run"}, AntiAffinity: "always"},
		{Workers: 2, Image: "x", Token: "t", Secret: "s", Client: []string{"keycast", "run"}, CPU: "two"},
	} {
		if _, err := Render(cfg); err == nil {
			t.Errorf("Render(%+v) succeeded", cfg)
		}
	}
}
