// Package kube renders the Kubernetes objects of a distributed run: an Indexed Job of N workers
// (completion index i runs segment i/N), the coordinator's Job, the Secret holding the NATS token
// and run secret, and, unless an existing NATS is named, a NATS Deployment and Service. Scheduling
// is Kubernetes' job; coordination is NATS' (package coord). The objects are the official
// k8s.io/api types, so what is rendered is what the API server accepts.
package kube

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/loadproof/loadproof/internal/cost"
)

// Defaults of Config.
const (
	DefaultName      = "loadproof"
	DefaultNATSImage = "nats:2.10-alpine"
	DefaultPortRange = "1024 65535"
	// indexAnnotation is where Kubernetes puts an Indexed Job pod's completion index.
	indexAnnotation = "batch.kubernetes.io/job-completion-index"
)

// Config describes one distributed run's objects. Zero values are documented defaults.
type Config struct {
	// Name prefixes every object; empty means DefaultName.
	Name string
	// Namespace of every object; empty leaves it to kubectl's context.
	Namespace string
	// Workers is the number of worker pods (segments); at least 1.
	Workers int
	// Image is the loadproof image (see the Dockerfile); required.
	Image string
	// NATS names an existing NATS server or cluster; empty deploys one (NATSImage, JetStream on).
	NATS      string
	NATSImage string
	// Token and Secret are the NATS token and the run secret, stored in the Secret; required (the
	// CLI draws random ones).
	Token, Secret string
	// Client is the client command as under loadproof (e.g. keycast run --url … -o /results/r.json).
	Client []string
	// AntiAffinity spreads workers one per node: "" (none), "preferred" or "required".
	AntiAffinity string
	// CPU and Memory are each worker's requests and limits ("" for none).
	CPU, Memory string
	// PortRange is net.ipv4.ip_local_port_range for worker pods (a safe sysctl); "-" leaves it out.
	PortRange string
	// ConfigSecret, when set, is a Secret mounted read-only at /config in every loadproof pod (users
	// file, capacity plan, TLS files).
	ConfigSecret string
	// AllowHost is passed to the workers' own host rules (a non-local target).
	AllowHost string
	// Deadline bounds each Job's run (activeDeadlineSeconds); 0 means DefaultDeadline.
	Deadline time.Duration
	// TTL is how long a finished Job and its pods stay (ttlSecondsAfterFinished); 0 means
	// DefaultTTL. Copy the coordinator's /results out before.
	TTL time.Duration
	// NATSTLSSecret, when set, names a Secret (tls.crt, tls.key, ca.crt) that turns TLS on for the
	// deployed NATS; every loadproof pod mounts it and checks the server against ca.crt.
	NATSTLSSecret string
	// ClientIPBase and ClientIPCount are each worker's own source range for LinkKeys tasks; an
	// empty base gives each worker its pod's own IP (the downward API), count ClientIPCount or 1.
	ClientIPBase  string
	ClientIPCount int
	// WorkerCostPerHour, when given, is each worker pod's machine price, passed as the workers'
	// --cost-per-hour so the coordinator prices the run over every machine (docs/cost.md);
	// CoordinatorCostPerHour is the coordinator pod's (coordinate --cost-per-hour). Not given: the
	// flag is left out, and a price given to the client command stands for every worker.
	WorkerCostPerHour, CoordinatorCostPerHour cost.Price
}

// Defaults of the Jobs' lifetimes, the run's user and the containers' resources.
const (
	DefaultDeadline = 2 * time.Hour
	DefaultTTL      = time.Hour
	// runAsUser is the non-root user every container runs as.
	runAsUser = 65532
)

func (c *Config) normalize() error {
	var errs []error
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Deadline <= 0 {
		c.Deadline = DefaultDeadline
	}
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	// Object names are Name plus a suffix of up to 12 characters ("-coordinator"), each a DNS-1123
	// label (a Service name must be one).
	if errs := validation.IsDNS1123Label(c.Name); len(errs) > 0 || len(c.Name) > 50 {
		errs = append(errs, "at most 50 characters (object names add up to 12)")
		return fmt.Errorf("kube: --name %q is not a valid name: %s", c.Name, strings.Join(errs, "; "))
	}
	if c.ClientIPCount < 0 {
		return fmt.Errorf("kube: --client-ip-count %d must not be negative", c.ClientIPCount)
	}
	if c.NATSImage == "" {
		c.NATSImage = DefaultNATSImage
	}
	if c.PortRange == "" {
		c.PortRange = DefaultPortRange
	}
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("kube: --workers %d must be at least 1", c.Workers))
	}
	if c.Image == "" {
		errs = append(errs, errors.New("kube: --image is required: the loadproof image built from the Dockerfile"))
	}
	if len(c.Client) == 0 {
		errs = append(errs, errors.New("kube: the client command is missing (after --)"))
	}
	if c.Token == "" || c.Secret == "" {
		errs = append(errs, errors.New("kube: a NATS token and a run secret are required"))
	}
	switch c.AntiAffinity {
	case "", "preferred", "required":
	default:
		errs = append(errs, fmt.Errorf("kube: --anti-affinity %q: want preferred or required", c.AntiAffinity))
	}
	for _, p := range []struct {
		flag  string
		price cost.Price
	}{{"--worker-cost-per-hour", c.WorkerCostPerHour}, {"--coordinator-cost-per-hour", c.CoordinatorCostPerHour}} {
		if p.price.Given {
			if err := p.price.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("kube: %s: %w", p.flag, err))
			}
		}
	}
	if _, err := cost.Currency(c.WorkerCostPerHour, c.CoordinatorCostPerHour); err != nil {
		errs = append(errs, fmt.Errorf("kube: --worker-cost-per-hour, --coordinator-cost-per-hour: %w", err))
	}
	for _, q := range []string{c.CPU, c.Memory} {
		if q != "" {
			if _, err := resource.ParseQuantity(q); err != nil {
				errs = append(errs, fmt.Errorf("kube: resource quantity %q: %v", q, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (c *Config) natsURL() string {
	if c.NATS != "" {
		return c.NATS
	}
	if c.NATSTLSSecret != "" {
		return "tls://" + c.Name + "-nats:4222"
	}
	return "nats://" + c.Name + "-nats:4222"
}

// natsTLSArgs are the loadproof flags that check the deployed NATS's certificate.
func (c *Config) natsTLSArgs() []string {
	if c.NATSTLSSecret == "" {
		return nil
	}
	return []string{"--nats-ca", "/tls/ca.crt"}
}

func (c *Config) meta(name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: c.labels(component)}
}

func (c *Config) labels(component string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "loadproof", "app.kubernetes.io/instance": c.Name, "app.kubernetes.io/component": component}
}

func (c *Config) secretName() string { return c.Name + "-secrets" }

// Objects returns the run's objects in apply order: Secret, NATS Service and Deployment (unless
// NATS names one), the worker Job, the coordinator Job.
func Objects(cfg Config) ([]any, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	objs := []any{cfg.secret()}
	if cfg.NATS == "" {
		objs = append(objs, cfg.natsConfig(), cfg.natsService(), cfg.natsDeployment(), cfg.natsPolicy())
	}
	return append(objs, cfg.workerJob(), cfg.coordinatorJob()), nil
}

// Render writes the objects as one YAML stream with a header of notes.
func Render(cfg Config) ([]byte, error) {
	objs, err := Objects(cfg)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("# loadproof distributed run (docs/distributed.md). Apply with kubectl apply -f; the coordinator Job's\n")
	b.WriteString("# log has the live progress; its results are written under /results (copy them out before the pod goes).\n")
	b.WriteString("# Worker pods set net.ipv4.ip_local_port_range (a safe sysctl). The open-file limit (ulimit -n) is the\n")
	b.WriteString("# container runtime's: loadproof raises its soft limit to the hard limit at start; where the node's hard\n")
	b.WriteString("# limit is low, raise it in the runtime's configuration (containerd LimitNOFILE) or spread over more workers.\n")
	b.WriteString("# Every container runs as a non-root user on a read-only root filesystem; the Jobs end by their\n")
	b.WriteString("# activeDeadlineSeconds and are deleted ttlSecondsAfterFinished after they finish: copy /results out first.\n")
	for _, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, fmt.Errorf("kube: rendering %T: %w", o, err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

func (c *Config) secret() *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: c.meta(c.secretName(), "secrets"),
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"nats-token": c.Token, "run-secret": c.Secret},
	}
}

func (c *Config) natsService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: c.meta(c.Name+"-nats", "nats"),
		Spec: corev1.ServiceSpec{
			Selector: c.labels("nats"),
			Ports:    []corev1.ServicePort{{Name: "client", Port: 4222, TargetPort: intstr.FromInt32(4222)}},
		},
	}
}

func (c *Config) natsDeployment() *appsv1.Deployment {
	one := int32(1)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: c.meta(c.Name+"-nats", "nats"),
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: c.labels("nats")},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: c.labels("nats")},
				Spec:       c.natsPod(),
			},
		},
	}
}

// natsConf is the deployed server's configuration. The token is read from the environment by the
// server itself ($NATS_TOKEN), so it never appears in a command line.
func (c *Config) natsConf() string {
	conf := "port: 4222\nmax_payload: 8MB\njetstream {\n  store_dir: \"/data\"\n}\nauthorization {\n  token: $NATS_TOKEN\n}\n"
	if c.NATSTLSSecret != "" {
		conf += "tls {\n  cert_file: \"/tls/tls.crt\"\n  key_file: \"/tls/tls.key\"\n}\n"
	}
	return conf
}

func (c *Config) natsConfig() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: c.meta(c.Name+"-nats", "nats"),
		Data:       map[string]string{"nats.conf": c.natsConf()},
	}
}

func (c *Config) natsPod() corev1.PodSpec {
	ctr := corev1.Container{
		Name:            "nats",
		Image:           c.NATSImage,
		Args:            []string{"-c", "/etc/nats/nats.conf"},
		Env:             []corev1.EnvVar{c.secretEnv("NATS_TOKEN", "nats-token")},
		Ports:           []corev1.ContainerPort{{Name: "client", ContainerPort: 4222}},
		SecurityContext: containerSecurity(),
		Resources:       resources("100m", "128Mi", "1Gi"),
		VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/nats", ReadOnly: true},
			{Name: "data", MountPath: "/data"}},
	}
	pod := c.podSpec()
	pod.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: c.Name + "-nats"}}}},
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	c.tlsVolume(&pod, &ctr)
	pod.RestartPolicy = corev1.RestartPolicyAlways
	pod.Containers = []corev1.Container{ctr}
	return pod
}

// natsPolicy admits only the run's own loadproof pods (workers and coordinator) to NATS.
func (c *Config) natsPolicy() *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(4222)
	tcp := corev1.ProtocolTCP
	from := func(component string) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: c.labels(component)}}
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: c.meta(c.Name+"-nats", "nats"),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: c.labels("nats")},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{from("worker"), from("coordinator")},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
}

// podSpec is the pod settings every pod of the run shares: no service-account token, a non-root
// user, the runtime's default seccomp profile.
func (c *Config) podSpec() corev1.PodSpec {
	no, yes := false, true
	uid := int64(runAsUser)
	return corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: &no,
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
	}
}

// containerSecurity is every container's security context.
func containerSecurity() *corev1.SecurityContext {
	no, yes := false, true
	return &corev1.SecurityContext{
		RunAsNonRoot: &yes, AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, Privileged: &no,
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// resources requests cpu and memory and limits memory.
func resources(cpu, mem, limit string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)},
	}
}

// tlsVolume mounts the NATS TLS Secret at /tls.
func (c *Config) tlsVolume(pod *corev1.PodSpec, ctr *corev1.Container) {
	if c.NATSTLSSecret == "" {
		return
	}
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "nats-tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: c.NATSTLSSecret}}})
	ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "nats-tls", MountPath: "/tls", ReadOnly: true})
}

func (c *Config) secretEnv(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: c.secretName()}, Key: key}}}
}

// loadproofEnv are the environment variables every loadproof pod reads: the token and run secret.
func (c *Config) loadproofEnv() []corev1.EnvVar {
	return []corev1.EnvVar{c.secretEnv("LOADPROOF_NATS_TOKEN", "nats-token"), c.secretEnv("LOADPROOF_SECRET", "run-secret")}
}

// WorkerArgs is the worker's command line (after the binary); JOB_COMPLETION_INDEX picks its segment.
func (c *Config) WorkerArgs() []string {
	args := append([]string{"worker", "--nats", c.natsURL(), "--prefix", c.Name}, c.natsTLSArgs()...)
	if c.AllowHost != "" {
		args = append(args, "--allow-host", c.AllowHost)
	}
	if c.WorkerCostPerHour.Given {
		args = append(args, "--cost-per-hour", c.WorkerCostPerHour.String())
	}
	return args
}

// CoordinatorArgs is the coordinator's command line (after the binary).
func (c *Config) CoordinatorArgs() []string {
	args := append([]string{"coordinate", "--workers", strconv.Itoa(c.Workers), "--nats", c.natsURL(), "--prefix", c.Name, "--join-timeout", "10m"}, c.natsTLSArgs()...)
	if c.CoordinatorCostPerHour.Given {
		args = append(args, "--cost-per-hour", c.CoordinatorCostPerHour.String())
	}
	return append(append(args, "--"), c.Client...)
}

func (c *Config) volumes(pod *corev1.PodSpec, ctr *corev1.Container, results bool) {
	if c.ConfigSecret != "" {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: c.ConfigSecret}}})
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "config", MountPath: "/config", ReadOnly: true})
	}
	if results {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "results", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "results", MountPath: "/results"})
	}
	// The root filesystem is read-only: temporary files (barrier sockets) go to an emptyDir.
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"})
	c.tlsVolume(pod, ctr)
	ctr.SecurityContext = containerSecurity()
}

func (c *Config) workerJob() *batchv1.Job {
	n := int32(c.Workers)
	zero := int32(0)
	indexed := batchv1.IndexedCompletion
	ctr := corev1.Container{
		Name:    "worker",
		Image:   c.Image,
		Command: append([]string{"loadproof"}, c.WorkerArgs()...),
		Env: append(c.loadproofEnv(), corev1.EnvVar{Name: "JOB_COMPLETION_INDEX", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + indexAnnotation + "']"}}}),
		Resources: resources("500m", "256Mi", "2Gi"),
	}
	// Each worker's own source range for LinkKeys tasks: the given one, or the pod's own IP.
	if c.ClientIPBase != "" {
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "LOADPROOF_CLIENT_IP_BASE", Value: c.ClientIPBase})
	} else {
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "LOADPROOF_CLIENT_IP_BASE", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}})
	}
	ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "LOADPROOF_CLIENT_IP_COUNT", Value: strconv.Itoa(max(c.ClientIPCount, 1))})
	// Tasks may name files only under /config (the --config-secret mount).
	ctr.Env = append(ctr.Env, corev1.EnvVar{Name: "LOADPROOF_TASK_FILES", Value: "/config"})
	if c.CPU != "" || c.Memory != "" {
		rl := corev1.ResourceList{}
		if c.CPU != "" {
			rl[corev1.ResourceCPU] = resource.MustParse(c.CPU)
		}
		if c.Memory != "" {
			rl[corev1.ResourceMemory] = resource.MustParse(c.Memory)
		}
		ctr.Resources = corev1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}
	}
	pod := c.podSpec()
	if c.PortRange != "-" {
		pod.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ip_local_port_range", Value: c.PortRange}}
	}
	if c.AntiAffinity != "" {
		term := corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: c.labels("worker")}, TopologyKey: "kubernetes.io/hostname"}
		aa := &corev1.PodAntiAffinity{}
		if c.AntiAffinity == "required" {
			aa.RequiredDuringSchedulingIgnoredDuringExecution = []corev1.PodAffinityTerm{term}
		} else {
			aa.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: term}}
		}
		pod.Affinity = &corev1.Affinity{PodAntiAffinity: aa}
	}
	c.volumes(&pod, &ctr, false)
	pod.Containers = []corev1.Container{ctr}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: c.meta(c.Name+"-workers", "worker"),
		Spec: batchv1.JobSpec{
			CompletionMode: &indexed,
			Completions:    &n,
			Parallelism:    &n,
			// A lost worker fails the run (the coordinator says which); a retried pod would join a
			// run whose start has passed.
			BackoffLimit:            &zero,
			ActiveDeadlineSeconds:   c.deadline(),
			TTLSecondsAfterFinished: c.ttl(),
			Template:                corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: c.labels("worker")}, Spec: pod},
		},
	}
}

func (c *Config) coordinatorJob() *batchv1.Job {
	one, zero := int32(1), int32(0)
	ctr := corev1.Container{
		Name:       "coordinator",
		Image:      c.Image,
		Command:    append([]string{"loadproof"}, c.CoordinatorArgs()...),
		Env:        c.loadproofEnv(),
		WorkingDir: "/results",
		Resources:  resources("250m", "256Mi", "2Gi"),
	}
	pod := c.podSpec()
	c.volumes(&pod, &ctr, true)
	pod.Containers = []corev1.Container{ctr}
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: c.meta(c.Name+"-coordinator", "coordinator"),
		Spec: batchv1.JobSpec{
			Completions:             &one,
			Parallelism:             &one,
			BackoffLimit:            &zero,
			ActiveDeadlineSeconds:   c.deadline(),
			TTLSecondsAfterFinished: c.ttl(),
			Template:                corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: c.labels("coordinator")}, Spec: pod},
		},
	}
}

func (c *Config) deadline() *int64 {
	d := int64(c.Deadline / time.Second)
	return &d
}

func (c *Config) ttl() *int32 {
	t := int32(min(c.TTL/time.Second, 1<<31-1))
	return &t
}

// SplitDocuments splits a YAML stream at its "---" lines, dropping comment-only documents.
func SplitDocuments(b []byte) [][]byte {
	var out [][]byte
	for _, d := range strings.Split(string(b), "\n---\n") {
		lines := strings.Split(d, "\n")
		keep := false
		for _, l := range lines {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") && t != "---" {
				keep = true
			}
		}
		if keep {
			out = append(out, []byte(strings.TrimPrefix(d, "---\n")))
		}
	}
	return out
}
