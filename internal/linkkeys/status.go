package linkkeys

import "strconv"

// Status is a CSIL-RPC transport status code, carried in the response
// envelope's "status" key.
type Status uint64

// The transport status registry. Codes 9 to 63 are unassigned; 64 and above
// are host extensions.
const (
	StatusOK                 Status = 0
	StatusMalformedEnvelope  Status = 1
	StatusUnknownServiceOrOp Status = 2
	StatusUnauthenticated    Status = 3
	StatusForbidden          Status = 4
	StatusVersionUnsupported Status = 5
	StatusInternal           Status = 6
	StatusUnavailable        Status = 7
	StatusDeadlineExceeded   Status = 8

	// StatusHostExtensionBase is the first code reserved for host extensions.
	StatusHostExtensionBase Status = 64
)

var statusNames = [...]string{
	StatusOK:                 "Ok",
	StatusMalformedEnvelope:  "MalformedEnvelope",
	StatusUnknownServiceOrOp: "UnknownServiceOrOp",
	StatusUnauthenticated:    "Unauthenticated",
	StatusForbidden:          "Forbidden",
	StatusVersionUnsupported: "VersionUnsupported",
	StatusInternal:           "Internal",
	StatusUnavailable:        "Unavailable",
	StatusDeadlineExceeded:   "DeadlineExceeded",
}

// String returns the registry name ("Ok", "Unavailable", ...),
// "HostExtension(N)" for codes of 64 and above and "Unassigned(N)" for 9..63.
func (s Status) String() string {
	if s < Status(len(statusNames)) {
		return statusNames[s]
	}
	if s >= StatusHostExtensionBase {
		return "HostExtension(" + strconv.FormatUint(uint64(s), 10) + ")"
	}
	return "Unassigned(" + strconv.FormatUint(uint64(s), 10) + ")"
}
