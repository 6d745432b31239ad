package linkkeysload

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		err  bool
	}{
		{"", 0, false}, {"1000", 1000, false}, {" 5 ", 5, false}, {"1e9", MaxRate, false},
		{"0", 0, true}, {"-5", 0, true}, {"NaN", 0, true}, {"inf", 0, true}, {"1e10", 0, true}, {"x", 0, true},
	} {
		r, err := ParseRate(tc.in)
		if tc.err {
			var ue *UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "invalid --rate "+`"`+tc.in+`"`) {
				t.Errorf("ParseRate(%q) = %v, %v; want a *UsageError naming the value", tc.in, r, err)
			}
			continue
		}
		if err != nil || r != tc.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tc.in, r, err, tc.want)
		}
	}
}

func TestParseDDoSWave(t *testing.T) {
	def, _ := ParseIPv4("base", DefaultDDoSBase)
	w, err := ParseDDoSWave("sources=100", 0)
	if err != nil || w != (DDoSWave{Sources: 100, Concurrency: DefaultWaveConcurrency, Base: def}) {
		t.Fatalf("defaults: %+v, %v", w, err)
	}
	w, err = ParseDDoSWave("sources=7", def+100)
	if err != nil || w.Base != def+100 {
		t.Fatalf("next base: %+v, %v", w, err)
	}
	w, err = ParseDDoSWave("sources=12000, at=5s,concurrency=9,base=127.9.0.0,name=late", 0)
	want, _ := ParseIPv4("base", "127.9.0.0")
	if err != nil || w != (DDoSWave{Name: "late", StartSecs: 5, Sources: 12000, Concurrency: 9, Base: want}) {
		t.Fatalf("every key: %+v, %v", w, err)
	}
	for in, msg := range map[string]string{
		"at=x,sourcez=1":      `--ddos-wave "at=x,sourcez=1": at="x": want seconds from 0 to 86400; unknown key "sourcez" (want sources, at, concurrency, base or name); sources=N is required`,
		"sources=0":           `sources="0": want a whole number from 1 to 4294967295`,
		"sources=1,sources=2": "sources given twice",
		"sources=3,base=::1":  `invalid base "::1": invalid IPv4 address syntax`,
		"sources":             `"sources" is not key=value`,
		"sources=4,at=86401":  `at="86401": want seconds from 0 to 86400`,
	} {
		_, err := ParseDDoSWave(in, 0)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseDDoSWave(%q): %v; want a *UsageError containing %q", in, err, msg)
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"", "1000", "0", "-1", "NaN", "inf", "1e9", "1e10", " 5 ", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("%q: error %v is not a *UsageError", s, err)
			}
			return
		}
		if s == "" && r != 0 {
			t.Fatal("empty rate must be the closed model")
		}
		if s != "" && !(r > 0 && r <= MaxRate) {
			t.Fatalf("rate %v accepted from %q", r, s)
		}
	})
}

func FuzzParseDDoSWave(f *testing.F) {
	for _, s := range []string{"sources=100", "sources=12000,at=5,concurrency=500,base=127.9.0.0,name=late", "at=1", "sources=0",
		"sources=1,sources=2", "base=::1,sources=3", "sources=4,at=-1", "sources=5,at=NaN", "", ",", "sources"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		w, err := ParseDDoSWave(s, 0)
		if err != nil {
			var ue *UsageError
			if !errors.As(err, &ue) || err.Error() == "" {
				t.Fatalf("%q: error %v is not a non-empty *UsageError", s, err)
			}
			return
		}
		if w.Sources == 0 || w.Concurrency == 0 || !(w.StartSecs >= 0 && w.StartSecs <= MaxWaveStartSecs) {
			t.Fatalf("accepted %q as %+v", s, w)
		}
	})
}

// TestClientConfigsValidate: each client's Validate is the one check of its settings, a
// *UsageError in the flags' terms with every problem at once; a good configuration passes.
func TestClientConfigsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"connections", ConnectionsConfig{Count: 1}.Validate(), []string{"--concurrency 0: must be at least 1"}},
		{"handshake-bench", HandshakeConfig{DurationSecs: 1}.Validate(), []string{"--concurrency 0: must be at least 1"}},
		{"ddos", DDoSConfig{Sources: 1}.Validate(), []string{"--concurrency 0: must be at least 1"}},
		{"request-bench", RequestConfig{Connections: 1, Op: "nope", Rate: -5}.Validate(),
			[]string{`invalid value "nope" for --op: possible values are domain-keys, hello`, "invalid --rate -5:"}},
		{"combined", CombinedConfig{Requests: &RequestStream{Connections: 1, DurationSecs: 1, Op: "nope", Sources: SourceAddrs{Base: 0x7f000001, Count: 1}}}.Validate(),
			[]string{`stream requests: invalid value "nope" for --request-op`}},
	} {
		var ue *UsageError
		if !errors.As(tc.err, &ue) {
			t.Errorf("%s: %v (%T), want a *UsageError", tc.name, tc.err, tc.err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(tc.err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.name, tc.err, w)
			}
		}
	}
	for name, err := range map[string]error{
		"connections":     ConnectionsConfig{Count: 1, Concurrency: 1}.Validate(),
		"handshake-bench": HandshakeConfig{Concurrency: 1}.Validate(),
		"ddos":            DDoSConfig{Concurrency: 1}.Validate(),
		"request-bench":   RequestConfig{Op: OpHello, Rate: MaxRate}.Validate(),
		"closed model":    RequestConfig{Op: OpDomainKeys}.Validate(),
	} {
		if err != nil {
			t.Errorf("%s: a good configuration refused: %v", name, err)
		}
	}
}
