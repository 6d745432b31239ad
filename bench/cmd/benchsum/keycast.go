package main

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
)

var kvField = regexp.MustCompile(`(\w+)=(\S+)`)

// runKeycastTLS reads bench/keycast-server-tls.sh's lines ("keycast-tls: transport=plain ...
// rps=N server_cpu_us_per_req=X") and prints each transport's medians and tls/plain.
func runKeycastTLS(e *env, args []string) error {
	if err := wantArgs(args, 1, 1); err != nil {
		return err
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	rps, cpu := map[string][]float64{}, map[string][]float64{}
	for n, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		kv := map[string]string{}
		for _, m := range kvField.FindAllStringSubmatch(l, -1) {
			kv[m[1]] = m[2]
		}
		r, err1 := strconv.ParseFloat(kv["rps"], 64)
		c, err2 := strconv.ParseFloat(kv["server_cpu_us_per_req"], 64)
		if kv["transport"] == "" || err1 != nil || err2 != nil {
			return fmt.Errorf("%s:%d: %q lacks transport=, rps= or server_cpu_us_per_req=", args[0], n+1, l)
		}
		rps[kv["transport"]] = append(rps[kv["transport"]], r)
		cpu[kv["transport"]] = append(cpu[kv["transport"]], c)
	}
	for _, t := range []string{"plain", "tls"} {
		if len(rps[t]) == 0 {
			return fmt.Errorf("%s: no transport=%s line", args[0], t)
		}
	}
	pr, pc := median(rps["plain"]), median(cpu["plain"])
	tr, tc := median(rps["tls"]), median(cpu["tls"])
	e.printf("plain: %.0f req/s, %.2f µs server CPU/req\n", pr, pc)
	e.printf("tls:   %.0f req/s, %.2f µs server CPU/req\n", tr, tc)
	e.printf("tls/plain: throughput %sx, server CPU per request %sx (+%.2f µs)\n", num("%.2f", ratio(tr, pr)), num("%.2f", ratio(tc, pc)), tc-pc)
	return nil
}

// runKeycastRPC prints one layout's summary of bench/keycast-server-rpc.sh: requests per second
// and server CPU per request of each method, and sign_event against the signing bound read before
// and after it.
func runKeycastRPC(e *env, args []string) error {
	if err := wantArgs(args, 11, 11); err != nil {
		return err
	}
	layout := args[0]
	names := []string{"GPK", "SIGN", "NIP44", "BOUND", "GPKCPU", "SIGNCPU", "NIP44CPU", "SIGNNS", "BOUND0", "SIGNNS0"}
	v := make([]float64, len(names))
	for i, n := range names {
		x, err := floatArg(n, args[i+1])
		if err != nil {
			return err
		}
		v[i] = x
	}
	gpk, sign, nip44, bound, gpkcpu, signcpu, nip44cpu, signns, bound0, signns0 := v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]
	e.printf("%s: get_public_key %.0f req/s (%.1f server CPU-us/req = %.0f req per server CPU-second); nip44_encrypt %.0f req/s (%.1f CPU-us/req)\n",
		layout, gpk, gpkcpu, 1e6/gpkcpu, nip44, nip44cpu)
	e.printf("%s: sign_event %.0f req/s = %.1f%% of the Schnorr bound %.0f signatures/s measured after it (wall clock); per CPU: %.1f server CPU-us/req vs %.1f CPU-us per bare signature = %.1f%% of the signing bound on the CPU the server got\n",
		layout, sign, 100*sign/bound, bound, signcpu, signns/1000, 100*signns/1000/signcpu)
	e.printf("%s: the bound before the sign_event run: %.1f CPU-us per bare signature (%.1f%%), %.0f signatures/s (%.1f%% by wall clock)\n",
		layout, signns0/1000, 100*signns0/1000/signcpu, bound0, 100*sign/bound0)
	if drift := math.Abs(signns-signns0) / min(signns, signns0); drift > 0.05 {
		e.printf("%s: WARNING: the two bound readings differ by %.0f%%: the host's speed changed during the run, so neither share is a measurement; run it again\n",
			layout, 100*drift)
	}
	return nil
}
