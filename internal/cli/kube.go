package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/loadproof/loadproof/internal/atomicfile"
	"github.com/loadproof/loadproof/internal/coord"
	"github.com/loadproof/loadproof/internal/kube"
)

func newKubeCmd(env *Env) *cobra.Command {
	c := &cobra.Command{
		Use:   "kube",
		Short: "Kubernetes objects for runs spread over many machines",
	}
	c.AddCommand(newKubeManifestsCmd(env))
	return c
}

func newKubeManifestsCmd(env *Env) *cobra.Command {
	var (
		cfg    kube.Config
		output string
	)
	c := &cobra.Command{
		Use:   "manifests --workers N --image IMAGE [--nats URL] -- <client command>",
		Short: "Write the YAML of a distributed run: worker Indexed Job, coordinator Job, Secret, NATS",
		Long: "Writes, as one YAML stream, the objects of a run spread over N pods: an Indexed Job of N workers\n" +
			"(completion index i runs segment i/N; optional pod anti-affinity, resources, the safe sysctl\n" +
			"net.ipv4.ip_local_port_range), the coordinator's Job running `loadproof coordinate -- <client\n" +
			"command>` (results under /results), a Secret with the NATS token and run secret (random unless\n" +
			"--nats-token/--secret are given), and, unless --nats names one, a NATS Deployment and Service\n" +
			"with JetStream. Files the client command reads (users file, plan) come from --config-secret,\n" +
			"mounted at /config. Build the image with the repository's Dockerfile. See docs/distributed.md.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 {
				return usageError("kube manifests: put the client command after --")
			}
			if err := coord.CheckCoordinated(args); err != nil {
				return usageError("%v", err)
			}
			cfg.Client = args
			if cfg.Token == "" {
				cfg.Token = coord.RandomSecret()
			}
			if cfg.Secret == "" {
				cfg.Secret = coord.RandomSecret()
			}
			b, err := kube.Render(cfg)
			if err != nil {
				return usageError("%v", err)
			}
			if output == "" || output == "-" {
				_, err = env.Stdout.Write(b)
				return err
			}
			if err := atomicfile.Write(output, b, 0o600); err != nil {
				return &ExitError{Code: ExitFailure, Err: fmt.Errorf("kube manifests: %w", err)}
			}
			fmt.Fprintf(env.Stderr, "kube manifests: wrote %s (it holds the NATS token and run secret: keep it private)\n", output)
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&cfg.Workers, "workers", 0, "worker pods (segments) (required)")
	f.StringVar(&cfg.Image, "image", "", "the loadproof image (built from the Dockerfile) (required)")
	f.StringVar(&cfg.NATS, "nats", "", "an existing NATS URL; empty deploys a NATS Deployment and Service")
	f.StringVar(&cfg.NATSImage, "nats-image", kube.DefaultNATSImage, "image of the deployed NATS")
	f.StringVar(&cfg.Name, "name", kube.DefaultName, "name prefix of every object (and the subject prefix)")
	f.StringVar(&cfg.Namespace, "namespace", "", "namespace of every object (default: kubectl's)")
	f.StringVar(&cfg.Token, "nats-token", env.Getenv("LOADPROOF_NATS_TOKEN"), "NATS token to store in the Secret (default: random; env LOADPROOF_NATS_TOKEN)")
	f.StringVar(&cfg.Secret, "secret", env.Getenv("LOADPROOF_SECRET"), "run secret to store in the Secret (default: random; env LOADPROOF_SECRET)")
	f.StringVar(&cfg.AntiAffinity, "anti-affinity", "", "spread workers one per node: preferred or required")
	f.StringVar(&cfg.CPU, "cpu", "", "each worker's CPU request and limit (e.g. 2)")
	f.StringVar(&cfg.Memory, "memory", "", "each worker's memory request and limit (e.g. 2Gi)")
	f.StringVar(&cfg.PortRange, "port-range", kube.DefaultPortRange, "workers' net.ipv4.ip_local_port_range (- to leave it out)")
	f.StringVar(&cfg.ConfigSecret, "config-secret", "", "Secret mounted read-only at /config in every loadproof pod (users file, plan)")
	f.StringVar(&cfg.AllowHost, "allow-host", "", "authorize this non-local target host on the workers")
	f.DurationVar(&cfg.Deadline, "deadline", kube.DefaultDeadline, "each Job's activeDeadlineSeconds: the run is stopped after this")
	f.DurationVar(&cfg.TTL, "ttl", kube.DefaultTTL, "each Job's ttlSecondsAfterFinished: a finished Job and its pods are deleted after this (copy /results out first)")
	f.StringVar(&cfg.NATSTLSSecret, "nats-tls-secret", "", "deployed NATS: serve TLS with this Secret's tls.crt and tls.key; clients check it against its ca.crt")
	f.StringVar(&cfg.ClientIPBase, "client-ip-base", "", "each worker's source range for LinkKeys tasks starts here (default: the pod's own IP)")
	f.IntVar(&cfg.ClientIPCount, "client-ip-count", 1, "how many source addresses each worker takes from its base")
	f.Var(&cfg.WorkerCostPerHour, "worker-cost-per-hour", "each worker pod's machine price per hour, as 1.53 or 1.53USD: passed as the workers' --cost-per-hour, so the run's cost adds every worker up (docs/cost.md)")
	f.Var(&cfg.CoordinatorCostPerHour, "coordinator-cost-per-hour", "the coordinator pod's machine price per hour, as 1.53 or 1.53USD: passed as coordinate --cost-per-hour (docs/cost.md)")
	f.StringVarP(&output, "output", "o", "", "file to write (default: stdout)")
	return c
}
