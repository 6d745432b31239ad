//go:build !goexperiment.jsonv2

package keycastload

// extraJudges adds encoding/json/v2 when built with GOEXPERIMENT=jsonv2 (classify_v2_test.go).
var extraJudges []struct {
	name string
	fn   func([]byte) bodyInfo
}
