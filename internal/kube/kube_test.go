package kube

import (
	"flag"
	"github.com/nats-io/nats-server/v2/server"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/loadproof/loadproof/internal/cost"
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
		case "v1/ConfigMap":
			obj = &corev1.ConfigMap{}
		case "networking.k8s.io/v1/NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
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
			AntiAffinity: "required", CPU: "2", Memory: "1Gi", ConfigSecret: "loadproof-config", AllowHost: "keycast.staging.test", NATSTLSSecret: "loadproof-nats-tls",
			Client: []string{"keycast", "run", "--url", "http://keycast.staging.test:3000", "--users-file", "/config/users.json", "-o", "results.json"}},
			[]string{"Secret/loadproof-secrets", "ConfigMap/loadproof-nats", "Service/loadproof-nats", "Deployment/loadproof-nats", "NetworkPolicy/loadproof-nats",
				"Job/loadproof-workers", "Job/loadproof-coordinator"}},
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
			hardened(t, objs, cfg.Name)
		})
	}
}

// hardened checks finding 9 on every pod of the run: the pod and container security contexts,
// no service-account token, resources on every container, the Jobs' deadline and TTL, no secret
// in any command line, and the NetworkPolicy admitting only the run's pods to NATS.
func hardened(t *testing.T, objs map[string]any, name string) {
	t.Helper()
	check := func(what string, pod corev1.PodSpec) {
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("%s: the service-account token is mounted", what)
		}
		psc := pod.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: pod security context %+v", what, psc)
		}
		for _, c := range pod.Containers {
			sc := c.SecurityContext
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				t.Errorf("%s/%s: container security context %+v", what, c.Name, sc)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s/%s: resources %+v", what, c.Name, c.Resources)
			}
			for _, a := range append(slices.Clone(c.Command), c.Args...) {
				if strings.Contains(a, "tok") || strings.Contains(a, "sec") || strings.Contains(a, "$(") {
					t.Errorf("%s/%s: a secret or an expansion in the command line: %q", what, c.Name, a)
				}
			}
		}
	}
	for _, j := range []string{"-workers", "-coordinator"} {
		job := objs["Job/"+name+j].(*batchv1.Job)
		if job.Spec.ActiveDeadlineSeconds == nil || *job.Spec.ActiveDeadlineSeconds <= 0 || job.Spec.TTLSecondsAfterFinished == nil {
			t.Errorf("Job %s%s: deadline %v, ttl %v", name, j, job.Spec.ActiveDeadlineSeconds, job.Spec.TTLSecondsAfterFinished)
		}
		check("Job "+name+j, job.Spec.Template.Spec)
	}
	if d, ok := objs["Deployment/"+name+"-nats"].(*appsv1.Deployment); ok {
		check("NATS", d.Spec.Template.Spec)
		np, ok := objs["NetworkPolicy/"+name+"-nats"].(*networkingv1.NetworkPolicy)
		if !ok || len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 2 || np.Spec.PodSelector.MatchLabels["app.kubernetes.io/component"] != "nats" {
			t.Errorf("NetworkPolicy %+v", np)
		}
	}
}

func TestRenderRefusesBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Name: "Bad_Name", Workers: 2, Image: "x", Token: "t", Secret: "s", Client: []string{"keycast", "run"}},
		{Name: strings.Repeat("a", 51), Workers: 2, Image: "x", Token: "t", Secret: "s", Client: []string{"keycast", "run"}},
		{},
		{Workers: 2, Image: "x", Token: "t", Secret: "s"},
		{Workers: 2, Image: "x", Token: "t", Secret: "s", Client: []string{"keycast", "run"}, AntiAffinity: "always"},
		{Workers: 2, Image: "x", Token: "t", Secret: "s", Client: []string{"keycast", "run"}, CPU: "two"},
		{Workers: 2, Image: "x", Token: "t", Secret: "s", Client: []string{"keycast", "run"},
			WorkerCostPerHour: cost.Price{PerHour: 1, Currency: "USD", Given: true}, CoordinatorCostPerHour: cost.Price{PerHour: 1, Currency: "EUR", Given: true}},
		{Workers: 2, Image: "x", Token: "t", Secret: "s", Client: []string{"keycast", "run"}, WorkerCostPerHour: cost.Price{PerHour: -1, Given: true}},
	} {
		if _, err := Render(cfg); err == nil {
			t.Errorf("Render(%+v) succeeded", cfg)
		}
	}
}

// TestRenderPassesPrices: a worker price given to kube manifests reaches every worker pod's
// command line as --cost-per-hour, the coordinator's reaches coordinate's (before the client
// command); without them neither command line names a price.
func TestRenderPassesPrices(t *testing.T) {
	base := Config{Workers: 2, Image: "x", Token: "t", Secret: "s", NATS: "nats://n:4222", Client: []string{"keycast", "run", "-o", "r.json"}}
	jobs := func(cfg Config) (worker, coordinator []string) {
		t.Helper()
		b, err := Render(cfg)
		if err != nil {
			t.Fatal(err)
		}
		objs := decodeStrict(t, b)
		return objs["Job/loadproof-workers"].(*batchv1.Job).Spec.Template.Spec.Containers[0].Command,
			objs["Job/loadproof-coordinator"].(*batchv1.Job).Spec.Template.Spec.Containers[0].Command
	}
	w, c := jobs(base)
	if slices.Contains(w, "--cost-per-hour") || slices.Contains(c, "--cost-per-hour") {
		t.Errorf("no price given, yet a command line names one:\n%q\n%q", w, c)
	}
	priced := base
	priced.WorkerCostPerHour = cost.Price{PerHour: 0.5, Currency: "USD", Given: true}
	priced.CoordinatorCostPerHour = cost.Price{PerHour: 0.25, Currency: "USD", Given: true}
	w, c = jobs(priced)
	if i := slices.Index(w, "--cost-per-hour"); i < 0 || i+1 >= len(w) || w[i+1] != "0.5USD" {
		t.Errorf("worker command %q; want --cost-per-hour 0.5USD", w)
	}
	dash := slices.Index(c, "--")
	if i := slices.Index(c, "--cost-per-hour"); i < 0 || i+1 >= len(c) || c[i+1] != "0.25USD" || i > dash {
		t.Errorf("coordinator command %q; want --cost-per-hour 0.25USD before --", c)
	}
	free := base
	free.WorkerCostPerHour = cost.Price{Given: true} // a free machine is a price, not "none"
	if w, _ = jobs(free); !slices.Contains(w, "--cost-per-hour") || w[slices.Index(w, "--cost-per-hour")+1] != "0" {
		t.Errorf("a free worker machine: command %q; want --cost-per-hour 0", w)
	}
}

// TestNATSConfReadsTokenFromEnv: the deployed server's configuration takes its token from the
// environment (the Secret), so no command line holds it; the server's own parser says so.
func TestNATSConfReadsTokenFromEnv(t *testing.T) {
	for _, tlsSecret := range []string{"", "tls"} {
		c := Config{Name: "x", NATSTLSSecret: tlsSecret}
		path := filepath.Join(t.TempDir(), "nats.conf")
		conf := c.natsConf()
		if tlsSecret != "" {
			// The certificate files are the Secret's, absent here: check the rest parses.
			conf = conf[:strings.Index(conf, "tls {")]
		}
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("NATS_TOKEN", "from-env-123")
		opts, err := server.ProcessConfigFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if opts.Authorization != "from-env-123" || !opts.JetStream || opts.StoreDir != "/data" || opts.MaxPayload != 8<<20 {
			t.Errorf("parsed %q, jetstream %v, store %q, max payload %d", opts.Authorization, opts.JetStream, opts.StoreDir, opts.MaxPayload)
		}
	}
}
