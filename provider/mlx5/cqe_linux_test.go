package mlx5

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/cq"
)

// TestDecodeFastPaths holds the decoders Poll inlines (decodeReq,
// decodeRecv) to decodeCQE, over random CQE bytes of their opcodes.
func TestDecodeFastPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 20000 {
		var c cqe64
		for k := range c {
			c[k] = byte(rng.Uint32())
		}
		recv := i%2 == 0
		op := uint8(cqeReq)
		if recv {
			op = cqeRespSend
		}
		c[cqeOpOwn] = op<<cqeOpcodeShift | c[cqeOpOwn]&cqeOwnerMask // format 0
		qpn := c.qpn()
		var fast, slow cq.WC
		ok := decodeCQE(&slow, &c, false)
		if recv {
			decodeRecv(&fast, &c, qpn)
		} else if !decodeReq(&fast, &c, qpn) {
			if ok {
				t.Fatalf("CQE %x: decodeReq refused what decodeCQE took", c)
			}
			continue
		}
		if !ok {
			t.Fatalf("CQE %x: decodeCQE refused it", c)
		}
		if d := cmp.Diff(slow, fast); d != "" {
			t.Fatalf("CQE %x (-decodeCQE +fast path):\n%s", c, d)
		}
	}
}
