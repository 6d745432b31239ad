package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples holds each command's help examples, by harness and command name ("lk connections",
// "kc run", "lp report"); "$CMD" stands for the binary and harness the user typed
// (linkkeys-loadtest, or loadproof linkkeys). The README and docs show the same commands.
var examples = map[string][]string{
	"lk server": {
		"$CMD server --info-file run/info.json --db-path run/db.sqlite --duration-secs 120",
		"$CMD server --processes 2 --info-file run/info.json   # one listener shared by 2 processes",
		"TCP_HANDSHAKE_BURST=1000000 $CMD server --metrics-addr 127.0.0.1:9464   # limiter raised, Prometheus metrics",
	},
	"lk connections": {
		"$CMD connections --info-file run/info.json --count 3000 --client-ip-count 64 --hold 30s",
		"$CMD connections --count 30000 --concurrency 2000 --client-ip-count 512 --json held.json",
		"$CMD connections --target 198.18.0.1:4433 --allow-host 198.18.0.1 --fingerprint HEX --domain keys.example --client-ip-base 198.18.1.1",
	},
	"lk handshake-bench": {
		"$CMD handshake-bench --info-file run/info.json --duration 10s --concurrency 64",
		"$CMD handshake-bench --resume --client-ip-count 256 --json hs.json",
		"$CMD handshake-bench --server-metrics http://127.0.0.1:9464/metrics --dashboard 127.0.0.1:8080",
	},
	"lk request-bench": {
		"$CMD request-bench --info-file run/info.json --connections 8 --duration 10s",
		"$CMD request-bench --op hello --pipeline 16 --json req.json",
		"$CMD request-bench --rate 20000 --connections 32 --duration 30s   # open model, corrected latency",
	},
	"lk ddos": {
		"$CMD ddos --info-file run/info.json --sources 5000 --concurrency 200",
		"$CMD ddos --sources 20000 --server-metrics run/server.log --json ddos.json",
		"$CMD ddos --sources 1000 --client-ip-base 127.5.0.0",
	},
	"lk combined": {
		"$CMD combined --held 5000 --handshake-concurrency 16 --request-connections 8 --duration 30s",
		"$CMD combined --held 1000 --ddos-wave sources=5000,at=10,concurrency=200 --json combined.json",
		"$CMD combined --request-connections 4 --request-rate 2000 --duration 20s",
	},
	"lk capacity": {
		"$CMD capacity --plan docs/linkkeys-capacity-plan.example.json --output ./lk-evidence",
		"$CMD capacity --plan plan.json --output ./ev --sign-key lab.key",
		"$CMD capacity --plan plan.json --output ./ev --allow-host 198.18.0.1",
	},
	"lk smoke": {
		"$CMD smoke",
		"$CMD smoke --json smoke.json",
		"$CMD smoke -v",
	},
	"lk profile": {
		"$CMD profile --bench handshake-bench --duration 10s --output prof",
		"$CMD profile --bench request-bench --output prof -- --connections 8 --pipeline 16",
		"$CMD profile --bench connections --output prof --serve 127.0.0.1:8081 -- --count 5000",
	},
	"kc server": {
		"$CMD server --addr 127.0.0.1:3000 --data-dir ./keycast-data",
		"$CMD server --addr 127.0.0.1:3443 --tls-self-signed 127.0.0.1,localhost --tls-cert-out /tmp/kc-ca.pem",
		"KEYCAST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test $CMD server --addr 127.0.0.1:3000",
	},
	"kc setup": {
		"$CMD setup --url http://127.0.0.1:3000 --users 100 -o users.json",
		"$CMD setup --url https://127.0.0.1:3443 --ca-cert /tmp/kc-ca.pem --mode http --users 10 -o users.json",
		"$CMD setup --url http://127.0.0.1:3000 --users 1000 --concurrency 32 -o users.json",
	},
	"kc run": {
		"$CMD run --url http://127.0.0.1:3000 --users-file users.json -m get-public-key -d 10s",
		"$CMD run --users-file users.json -m sign-event --rate 2000 --duration 30s -o results.json",
		"$CMD run --users-file users.json -c 64 --duration 60 --dashboard 127.0.0.1:8080 --max-error-rate 0.01",
	},
	"kc report": {
		"$CMD report -i results.json",
		"$CMD report -i results.json --format csv",
		"$CMD report -i results.json --compare baseline.json",
	},
	"kc capacity": {
		"$CMD capacity --plan ./capacity-plan.json --output ./capacity-evidence",
		"$CMD capacity --plan ./staging-plan.json --allow-host keycast.staging.example --output ./staging-evidence",
		"$CMD capacity -p plan.json -o ev --sign-key lab.key",
	},
	"kc profile": {
		"$CMD profile --url http://127.0.0.1:3000 --users 20 --concurrency 16 --duration 30s",
		"$CMD profile --users 20 --concurrency 16 --method sign-event --output prof",
		"$CMD profile --output prof --serve 127.0.0.1:8081",
	},
	"lp report": {
		"$CMD report run.json",
		"$CMD report --format html -o report.html part-1.json part-2.json   # segments of one run, merged exactly",
		"$CMD report --format html --compare before.json after.json -o diff.html",
		"$CMD report --format hgrm run.json",
	},
	"lp verify": {
		"$CMD verify ./capacity-evidence",
		"$CMD verify --key lab.pub ./capacity-evidence",
		"$CMD verify run.json",
	},
	"lp keygen": {
		"$CMD keygen --out lab   # lab.key (0600) and lab.pub",
		"$CMD keycast capacity -p plan.json -o ev --sign-key lab.key",
		"$CMD verify --key lab.pub ev",
	},
	"lp demo": {
		"$CMD demo",
		"$CMD demo --output ./demo-results",
		"$CMD demo --run-secs 5 --phase-secs 3   # a shorter demo",
	},
	"lp search": {
		"$CMD search --vary rate --from 500 --to 64000 --slo 'p99<20ms,errors<0.5%' -o search.json -- keycast run --url http://127.0.0.1:3000 --users-file users.json --duration 10 --method sign-event",
		"$CMD search --vary count --from 10000 --to 1000000 --slo 'failed<0.01%' -o held.json -- linkkeys connections --info-file run/info.json --hold-secs 30",
		"$CMD search --vary rate --from 1000 --to 50000 --trials 5 --resolution 2% --slo 'p99<5ms' --abort-on 'errors>50%' -- linkkeys request-bench --connections 8",
	},
	"lp coordinate": {
		"$CMD coordinate --workers 4 -- keycast run --url http://127.0.0.1:3000 --users-file users.json --duration 30s",
		"$CMD coordinate --workers 4 -- keycast capacity --plan plan.json --output evidence",
		"$CMD coordinate --workers 8 --listen 0.0.0.0:4222 --manifest run.coordination.json -- linkkeys connections --count 200000",
	},
	"lp worker": {
		"$CMD worker --nats nats://A:4222 --nats-token-file run.coordination.json.nats-token --secret-file run.coordination.json.secret",
		"$CMD worker --nats nats://A:4222 --client-ip-base 198.18.1.0 --client-ip-count 256 ...",
		"$CMD worker --nats nats://A:4222 --join-timeout 30m ...",
	},
	"lp manifests": {
		"$CMD kube manifests --workers 16 --image registry.example/loadproof:dev --config-secret loadproof-config -- keycast run ...",
		"$CMD kube manifests --workers 4 --image loadproof:dev -- linkkeys connections --count 100000 > run.yaml",
		"kubectl apply -f run.yaml",
	},
}

// applyExamples sets the examples of every command of the tree under root.
func applyExamples(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if ex, ok := examples[exampleKey(c)]; ok && c.Example == "" && c.HasParent() {
			cmdPath := c.Parent().CommandPath()
			if c.Parent().Name() == "kube" {
				cmdPath = c.Parent().Parent().CommandPath()
			}
			lines := make([]string, len(ex))
			for i, e := range ex {
				lines[i] = "  " + strings.ReplaceAll(e, "$CMD", cmdPath)
			}
			c.Example = strings.Join(lines, "\n")
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// exampleKey names a command by its harness ("lk", "kc", or "lp" for loadproof's own) and name.
func exampleKey(c *cobra.Command) string {
	h := "lp"
	for p := c.Parent(); p != nil; p = p.Parent() {
		switch p.Name() {
		case "linkkeys", "linkkeys-loadtest":
			h = "lk"
		case "keycast", "keycast-loadtest":
			h = "kc"
		}
	}
	return h + " " + c.Name()
}
