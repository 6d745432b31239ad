package keycastload

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/loadproof/loadproof/internal/keycast"
)

// TestRunRefusesHeaderInjectionFromTheUsersFile is issue 13 item 1: a users-file token holding
// CR/LF was written into the request head as is, so a crafted file could add headers (or whole
// requests) to what the tool sends. Run must refuse the file before it connects to anything.
func TestRunRefusesHeaderInjectionFromTheUsersFile(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	var seen atomic.Value
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				buf := make([]byte, 8192)
				n, _ := c.Read(buf)
				seen.Store(string(buf[:n]))
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"))
			}()
		}
	}()
	users := testUsers(3)
	users[2].UcanToken = "tok\r\nX-Injected: yes"
	cfg := baseConfig("http://"+ln.Addr().String(), 0)
	cfg.Users, cfg.Requests, cfg.UsersFile = users, 6, "users.json"
	_, err = Run(context.Background(), cfg)
	if err == nil {
		t.Fatalf("run accepted a token with CR/LF; the server saw %q", seen.Load())
	}
	for _, want := range []string{"users.json", "user 2", "ucan_token", "carriage return"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connections were opened before the users were checked", n)
	}
}

func TestCheckUsersNamesEveryProblem(t *testing.T) {
	users := testUsers(4)
	users[0].UcanToken = ""
	users[1].UcanToken = "a b"
	users[2].Pubkey = "zz"
	users[3].UcanToken = "ok\x00"
	err := CheckUsers(users, "u.json")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"user 0 (ucan_token): is empty",
		"user 1 (ucan_token): contains a space at byte 1",
		"user 2 (pubkey): ",
		"user 3 (ucan_token): contains the control byte 0x00 at byte 2",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if err := CheckUsers(testUsers(3), "u.json"); err != nil {
		t.Fatal(err)
	}
	many := testUsers(30)
	for i := range many {
		many[i].UcanToken = "\n"
	}
	if err := CheckUsers(many, "u.json"); err == nil || !strings.Contains(err.Error(), "and 20 more") {
		t.Fatalf("30 bad users: %v", err)
	}
}

func TestCheckHeaderValue(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"eyJhbGciOi.eyJhdWQiOi.sig_-~+/=", ""},
		{"", "is empty"},
		{"a\rb", "carriage return (CR) at byte 1"},
		{"a\nb", "line feed (LF) at byte 1"},
		{"a\tb", "tab at byte 1"},
		{"a\x7f", "control byte 0x7f at byte 1"},
		{"é", "non-ASCII byte 0xc3 at byte 0"},
		{strings.Repeat("a", MaxTokenBytes+1), "longer than"},
	} {
		err := CheckToken(tc.in)
		if tc.want == "" {
			if err != nil {
				t.Errorf("CheckToken(%q) = %v", tc.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckToken(%.20q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestParseTargetRefusesUnsafeHosts(t *testing.T) {
	for _, in := range []string{"http://exa\u00e9mple", "http://a%0d%0ab", "http://a b", "http://x\r\nY: z"} {
		if tg, err := parseTarget(in); err == nil {
			t.Errorf("parseTarget(%q) = host %q, want an error", in, tg.host)
		}
	}
}

// FuzzRequestHead checks the validators against the request head they protect: whenever a URL
// passes parseTarget and a token passes CheckToken, the precomputed head is exactly five CRLF-ended
// lines (request line, Host, User-Agent, Authorization, Content-Type) with no other control byte, so
// nothing taken from a flag or a file can add a header or split the request.
func FuzzRequestHead(f *testing.F) {
	for _, s := range [][2]string{
		{"http://127.0.0.1:3000", "tok"},
		{"https://keycast.example/base/", "eyJ.eyJ.sig"},
		{"http://[::1]:8080/a%20b", "t\r\nX: y"},
		{"http://x/\r\n", "t"},
		{"http://h\u00e9/", "t"},
		{"http://x/p q", "a b"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, rawURL, token string) {
		tg, err := parseTarget(rawURL)
		if err != nil || CheckToken(token) != nil {
			return
		}
		head := newUserClient(tg, keycast.PathNostr, token).prefix
		if !bytes.HasSuffix(head, []byte("\r\n")) {
			t.Fatalf("head %q does not end in CRLF", head)
		}
		lines := bytes.Split(head[:len(head)-2], []byte("\r\n"))
		if len(lines) != 5 {
			t.Fatalf("head has %d lines, want 5: %q", len(lines), head)
		}
		for _, l := range lines {
			for _, c := range l {
				if c < 0x20 || c == 0x7f {
					t.Fatalf("control byte %#x in head line %q", c, l)
				}
			}
		}
		if parts := bytes.Split(lines[0], []byte(" ")); len(parts) != 3 {
			t.Fatalf("request line %q has %d parts", lines[0], len(parts))
		}
		if !bytes.Equal(lines[3], []byte("Authorization: Bearer "+token)) {
			t.Fatalf("authorization line %q", lines[3])
		}
	})
}
