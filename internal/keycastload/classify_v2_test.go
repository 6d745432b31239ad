//go:build goexperiment.jsonv2

package keycastload

import (
	"encoding/json/jsontext"
	jsonv2 "encoding/json/v2"
)

// extraJudges: encoding/json/v2 decoding the top level into raw values, as scanBodyJSON does
// with encoding/json.
var extraJudges = []struct {
	name string
	fn   func([]byte) bodyInfo
}{{"json_v2", scanBodyV2}}

func scanBodyV2(b []byte) bodyInfo {
	var m map[string]jsontext.Value
	// AllowDuplicateNames: encoding/json (v1) lets the last of a repeated member count.
	if jsonv2.Unmarshal(b, &m, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) != nil || m == nil {
		return bodyInfo{}
	}
	info := bodyInfo{object: true}
	str := func(v jsontext.Value) []byte {
		var s string
		if v.Kind() != '"' || jsonv2.Unmarshal(v, &s, jsontext.AllowInvalidUTF8(true)) != nil {
			return nil
		}
		return []byte(s)
	}
	if e, ok := m["error"]; ok && string(e) != "null" {
		info.hasError, info.errText = true, str(e)
	}
	if c, ok := m["code"]; ok {
		info.code = str(c)
	}
	return info
}
