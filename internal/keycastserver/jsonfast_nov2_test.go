//go:build !goexperiment.jsonv2

package keycastserver

// extraDecoders adds encoding/json/v2 when built with GOEXPERIMENT=jsonv2 (jsonfast_v2_test.go).
var extraDecoders []struct {
	name string
	fn   func([]byte, string) (decodedCall, bool)
}
