package httpwire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSkipValue(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	for _, tc := range []struct {
		in   string
		ok   bool
		rest string
	}{
		{`"a\"b" x`, true, " x"},
		{`{"a":[1,-2.5e+3,true,false,null,{}],"b":"\u00e9"},`, true, ","},
		{`0`, true, ""},
		{`-0.0e0`, true, ""},
		{`[ ]`, true, ""},
		{`{ }`, true, ""},
		{deep, true, ""},
		{"[" + deep + "]", false, ""},
		{`01`, true, "1"}, // the 1 is what follows a 0
		{`-`, false, ""},
		{`1.`, false, ""},
		{`1e`, false, ""},
		{`.5`, false, ""},
		{`[1,]`, false, ""},
		{`{"a":1,}`, false, ""},
		{`{"a" 1}`, false, ""},
		{`{1:2}`, false, ""},
		{`"\x"`, false, ""},
		{`"\u12"`, false, ""},
		{"\"a\x01\"", false, ""},
		{`tru`, false, ""},
		{`nul`, false, ""},
		{``, false, ""},
	} {
		end, ok := SkipValue([]byte(tc.in), 0)
		if ok != tc.ok || (ok && tc.in[end:] != tc.rest) {
			t.Errorf("SkipValue(%q) = %d %v", tc.in, end, ok)
		}
	}
}

func TestPlainStringAndUint(t *testing.T) {
	for in, want := range map[string]string{`"abc"`: "abc", `"é"`: "é", `""`: ""} {
		if s, end, ok := PlainString([]byte(in), 0); !ok || string(s) != want || end != len(in) {
			t.Errorf("PlainString(%q) = %q %d %v", in, s, end, ok)
		}
	}
	for _, in := range []string{`"a\n"`, "\"\xff\"", "\"\x01\"", `"abc`, `abc`} {
		if _, _, ok := PlainString([]byte(in), 0); ok {
			t.Errorf("PlainString(%q) accepted", in)
		}
	}
	if s, _, ok := String([]byte(`"a\u00e9\n"`), 0); !ok || s != "aé\n" {
		t.Errorf("String with escapes = %q %v", s, ok)
	}
	for in, want := range map[string]int64{"0": 0, "17,": 17, "123456789012345678": 123456789012345678} {
		if n, _, ok := PlainUint([]byte(in), 0); !ok || n != want {
			t.Errorf("PlainUint(%q) = %d %v", in, n, ok)
		}
	}
	for _, in := range []string{"01", "-1", "1.5", "1e3", "1234567890123456789", "", "x"} {
		if _, _, ok := PlainUint([]byte(in), 0); ok {
			t.Errorf("PlainUint(%q) accepted", in)
		}
	}
}

func TestObjectAndArray(t *testing.T) {
	b := []byte(` { "a" : [1, "x"] , "b\u0021":null } `)
	o, ok := OpenObject(b, 0)
	var keys []string
	for ok {
		key, esc, more, ok2 := o.Next()
		if !ok2 {
			t.Fatalf("syntax error at %d", o.Pos())
		}
		if !more {
			break
		}
		keys = append(keys, string(key)+map[bool]string{true: "(esc)"}[esc])
		if string(key) == "a" {
			a, _ := OpenArray(b, o.Pos())
			n := 0
			for {
				more, ok := a.Next()
				if !ok {
					t.Fatal("array syntax error")
				}
				if !more {
					break
				}
				n++
				a.Skip()
			}
			if n != 2 {
				t.Fatalf("%d elements", n)
			}
			o.Seek(a.Pos())
			continue
		}
		o.Skip()
	}
	if strings.Join(keys, ",") != `a,b\u0021(esc)` || SkipWS(b, o.Pos()) != len(b) {
		t.Fatalf("keys %q, end %d", keys, o.Pos())
	}
}

// FuzzSkipValue checks the validating skip against encoding/json: a text SkipValue reads whole is
// valid JSON, and valid JSON nested less than MaxDepth deep is read whole.
func FuzzSkipValue(f *testing.F) {
	for _, s := range []string{`{"method":"sign_event","params":[{"kind":1,"tags":[["p","x"]],"content":"é\n"}]}`,
		`[1,-2.5e3,true,null,{"a":[]}]`, `"\ud800"`, `{"a":1,}`, `01`, `[[[]]]`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, ok := SkipValue(b, SkipWS(b, 0))
		whole := ok && SkipWS(b, end) == len(b)
		valid := json.Valid(b)
		if whole && !valid {
			t.Fatalf("SkipValue reads %q whole, encoding/json refuses it", b)
		}
		if valid && !whole && depth(b) < MaxDepth {
			t.Fatalf("encoding/json accepts %q (depth %d), SkipValue does not", b, depth(b))
		}
	})
}

// depth is the nesting depth of valid JSON.
func depth(b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	d, most := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return most
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			d++
			most = max(most, d)
		case json.Delim('}'), json.Delim(']'):
			d--
		}
	}
}

// FuzzPlainString checks the plain-string and string readers against encoding/json: what they
// read is a JSON string whose value is what they return.
func FuzzPlainString(f *testing.F) {
	for _, s := range []string{`"abc"`, `"é"`, `"a\"b"`, `"\u00e9"`, "\"\xff\"", `"\ud800"`, `"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, end, ok := PlainString(b, 0); ok {
			var v string
			if err := json.Unmarshal(b[:end], &v); err != nil || v != string(s) {
				t.Fatalf("PlainString(%q) = %q, encoding/json %q %v", b, s, v, err)
			}
		}
		if s, end, ok := String(b, 0); ok {
			var v string
			if err := json.Unmarshal(b[:end], &v); err != nil || v != s {
				t.Fatalf("String(%q) = %q, encoding/json %q %v", b, s, v, err)
			}
		}
	})
}
