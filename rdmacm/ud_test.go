package rdmacm

import (
	"errors"
	"syscall"
	"testing"
)

// A UD ID's UNREACHABLE with a positive status is the peer's SIDR REP
// refusing (ib_cm's enum ib_cm_sidr_status); a negative one an errno
// (the SIDR REQ timed out).
func TestSIDRStatusErr(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   string
	}{
		{SIDRUnsupported, "UD request refused: nobody listens on the port (SIDR status 1, unsupported)"},
		{SIDRReject, "UD request rejected by the peer (SIDR status 2, reject)"},
		{3, "UD request refused: no QP (SIDR status 3)"},
		{4, "UD request refused (SIDR status 4)"},
	} {
		err := statusErr(EventUnreachable, tc.status, nil)
		var se *SIDRError
		if !errors.As(err, &se) || se.Status != tc.status || err.Error() != tc.want || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("status %d: %v, want a *SIDRError %q (ECONNREFUSED)", tc.status, err, tc.want)
		}
	}
	if err := statusErr(EventUnreachable, -int(syscall.ETIMEDOUT), nil); !errors.Is(err, syscall.ETIMEDOUT) {
		t.Errorf("status -ETIMEDOUT: %v", err)
	}
}

func TestUDPrivateDataLimits(t *testing.T) {
	for _, ps := range []PortSpace{PortSpaceUDP, PortSpaceIPoIB} {
		for msg, max := range map[string]int{"connect": 180, "accept": 136, "reject": 136} {
			if err := checkPrivateData(ps, msg, make([]byte, max)); err != nil {
				t.Errorf("%v %s with %d bytes: %v", ps, msg, max, err)
			}
			if err := checkPrivateData(ps, msg, make([]byte, max+1)); !errors.Is(err, syscall.EINVAL) {
				t.Errorf("%v %s with %d bytes: %v, want EINVAL", ps, msg, max+1, err)
			}
		}
	}
}
