//go:build ignore

// keycast-slowbody runs the slow-body attack of docs/reliability.md (Keycast server, 10) against
// a Keycast reference server on 127.0.0.1, and measures what a normal client sees meanwhile.
//
// The attacker holds -conns connections, each sending a "POST /api/auth/register" head with
// Content-Length: 10000 and never the body; whenever the server closes one (an eviction, or
// the body timeout) it dials a new one at once, for -duration, at most -max-dials in all and
// -rate dials a second (0: as fast as it can). Two normal clients send get_public_key every
// -probe-every: one on a new connection each time, one on a keep-alive connection (reopened
// after an error). The server's keycast_http_connections_evicted_total is read once a second.
//
// It prints evictions per second and each normal client's latency (p50, p99, max) and failures.
// Run it through bench/keycast-slowbody.sh, which starts the server and makes the token:
//
//	go run bench/keycast-slowbody.go -addr 127.0.0.1:PORT -token TOKEN
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "", "server address, 127.0.0.1:PORT (loopback only)")
	token := flag.String("token", "", "access token for get_public_key")
	conns := flag.Int("conns", 12000, "attack connections held at once")
	duration := flag.Duration("duration", 30*time.Second, "how long the attack lasts")
	maxDials := flag.Int64("max-dials", 400_000, "most attack connections opened in all")
	rate := flag.Int("rate", 0, "most attack connections opened a second (0: no limit)")
	probeEvery := flag.Duration("probe-every", 100*time.Millisecond, "interval between a normal client's requests")
	flag.Parse()
	host, _, err := net.SplitHostPort(*addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() || *token == "" {
		fmt.Fprintln(os.Stderr, "keycast-slowbody: -addr must be a 127.0.0.0/8 host:port and -token set")
		os.Exit(2)
	}
	if *duration > 2*time.Minute || *conns > 18000 {
		fmt.Fprintln(os.Stderr, "keycast-slowbody: -duration at most 2m and -conns at most 18000 (the open-file limit)")
		os.Exit(2)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var a attack
	a.head = "POST /api/auth/register HTTP/1.1\r\nHost: " + *addr + "\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n"
	a.addr, a.maxDials = *addr, *maxDials
	if *rate > 0 {
		a.tokens = make(chan struct{}, *rate)
		go func() {
			t := time.NewTicker(time.Second / time.Duration(*rate))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					select {
					case a.tokens <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	gpk := `{"method":"get_public_key","params":[]}`
	req := func(close bool) string {
		h := "POST /api/nostr HTTP/1.1\r\nHost: " + *addr + "\r\nContent-Type: application/json\r\nAuthorization: Bearer " + *token +
			"\r\nContent-Length: " + strconv.Itoa(len(gpk)) + "\r\n"
		if close {
			h += "Connection: close\r\n"
		}
		return h + "\r\n" + gpk
	}

	before := evictions(*addr)
	start := time.Now()
	var wg sync.WaitGroup
	for range *conns {
		wg.Add(1)
		go func() { defer wg.Done(); a.hold(ctx) }()
	}
	var fresh, kept probe
	wg.Add(3)
	go func() {
		defer wg.Done()
		fresh.run(ctx, *probeEvery, func() (time.Duration, error) { return once(*addr, req(true)) })
	}()
	go func() { defer wg.Done(); kept.run(ctx, *probeEvery, keepAlive(*addr, req(false))) }()
	var perSec []float64
	go func() {
		defer wg.Done()
		prev, prevT := before, time.Now()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			cur, now := evictions(*addr), time.Now()
			if cur.ok && prev.ok {
				perSec = append(perSec, float64(cur.total-prev.total)/now.Sub(prevT).Seconds())
			}
			prev, prevT = cur, now
		}
	}()
	wg.Wait()
	elapsed := time.Since(start)
	after := evictions(*addr)

	fmt.Printf("attack: %d connections held, %.1f s: %d opened, %d closed by the server without an answer, %d answered 503, %d answered otherwise, %d dials failed\n",
		*conns, elapsed.Seconds(), a.dials.Load(), a.silent.Load(), a.shed.Load(), a.answered.Load(), a.dialErrs.Load())
	if before.ok && after.ok {
		slices.Sort(perSec)
		fmt.Printf("evictions: %d in all (stalled_head %d, stalled_body %d, idle %d), %.0f/s on average; per 1 s sample min %.0f, median %.0f, max %.0f\n",
			after.total-before.total, after.byReason["stalled_head"]-before.byReason["stalled_head"],
			after.byReason["stalled_body"]-before.byReason["stalled_body"], after.byReason["idle"]-before.byReason["idle"],
			float64(after.total-before.total)/elapsed.Seconds(), pick(perSec, 0), pick(perSec, 0.5), pick(perSec, 1))
	} else {
		fmt.Println("evictions: the server's /api/metrics could not be read")
	}
	fresh.print("normal client, new connection per request")
	kept.print("normal client, keep-alive connection")
	if fresh.fail.Load()+kept.fail.Load() > 0 {
		os.Exit(1)
	}
}

// attack holds connections that send a head and never the body.
type attack struct {
	addr, head                              string
	maxDials                                int64
	tokens                                  chan struct{}
	dials, dialErrs, silent, shed, answered atomic.Int64
}

func (a *attack) hold(ctx context.Context) {
	buf := make([]byte, 512)
	for ctx.Err() == nil {
		if a.tokens != nil {
			select {
			case <-a.tokens:
			case <-ctx.Done():
				return
			}
		}
		if a.dials.Add(1) > a.maxDials {
			a.dials.Add(-1)
			<-ctx.Done()
			return
		}
		d := net.Dialer{Timeout: 2 * time.Second}
		c, err := d.DialContext(ctx, "tcp", a.addr)
		if err != nil {
			a.dialErrs.Add(1)
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		io.WriteString(c, a.head)
		n, _ := io.ReadAtLeast(c, buf, 12)
		switch {
		case ctx.Err() != nil:
		case n < 12:
			a.silent.Add(1)
		case string(buf[:12]) == "HTTP/1.1 503":
			a.shed.Add(1)
		default:
			a.answered.Add(1)
		}
		stop()
		c.Close()
	}
}

// probe is one normal client's record.
type probe struct {
	mu   sync.Mutex
	lat  []time.Duration // successful requests
	fail atomic.Int64
	errs map[string]int
}

func (p *probe) run(ctx context.Context, every time.Duration, do func() (time.Duration, error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d, err := do()
		p.mu.Lock()
		if err != nil {
			p.fail.Add(1)
			if p.errs == nil {
				p.errs = map[string]int{}
			}
			p.errs[err.Error()]++
		} else {
			p.lat = append(p.lat, d)
		}
		p.mu.Unlock()
	}
}

func (p *probe) print(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	slices.Sort(p.lat)
	ms := func(q float64) string {
		if len(p.lat) == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f ms", float64(p.lat[min(int(q*float64(len(p.lat))), len(p.lat)-1)])/1e6)
	}
	fmt.Printf("%s: %d answered 200, %d failed; latency p50 %s, p99 %s, max %s\n", name, len(p.lat), p.fail.Load(), ms(0.5), ms(0.99), ms(1))
	for e, n := range p.errs {
		fmt.Printf("  failed %d× : %s\n", n, e)
	}
}

// once sends raw on a new connection and times the 200 answer (5 s at most).
func once(addr, raw string) (time.Duration, error) {
	start := time.Now()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(start.Add(5 * time.Second))
	return exchange(c, bufio.NewReader(c), raw, start)
}

// keepAlive returns a request function that reuses one connection, reopening it after an error.
func keepAlive(addr, raw string) func() (time.Duration, error) {
	var c net.Conn
	var br *bufio.Reader
	return func() (time.Duration, error) {
		start := time.Now()
		if c == nil {
			var err error
			if c, err = net.DialTimeout("tcp", addr, 5*time.Second); err != nil {
				c = nil
				return 0, err
			}
			br = bufio.NewReader(c)
		}
		c.SetDeadline(start.Add(5 * time.Second))
		d, err := exchange(c, br, raw, start)
		if err != nil {
			c.Close()
			c = nil
		}
		return d, err
	}
}

func exchange(c net.Conn, br *bufio.Reader, raw string, start time.Time) (time.Duration, error) {
	if _, err := io.WriteString(c, raw); err != nil {
		return 0, err
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", res.StatusCode)
	}
	return time.Since(start), nil
}

type evicted struct {
	ok       bool
	total    int64
	byReason map[string]int64
}

// evictions reads keycast_http_connections_evicted_total from /api/metrics.
func evictions(addr string) evicted {
	hc := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := hc.Get("http://" + addr + "/api/metrics")
	if err != nil {
		return evicted{}
	}
	defer res.Body.Close()
	e := evicted{ok: res.StatusCode == http.StatusOK, byReason: map[string]int64{}}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), `keycast_http_connections_evicted_total{reason="`)
		if !ok {
			continue
		}
		reason, val, _ := strings.Cut(rest, `"} `)
		n, _ := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		e.byReason[reason] = n
		e.total += n
	}
	return e
}

func pick(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}
