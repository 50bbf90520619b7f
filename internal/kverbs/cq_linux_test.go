package kverbs_test

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/uapi"
)

// rxe_create_cq refuses every CQ flag, the completion timestamp one
// included (EOPNOTSUPP): the fact provider/rxe's refusal of
// cq.Config.Timestamps stands on.
func TestCreateCQFlagsRefusedByRXE(t *testing.T) {
	c := conn(t, nil)
	var resp uapi.RxeCreateCQResp
	_, err := kverbs.CreateCQ(c, kverbs.CQReq{CQE: 16, Channel: -1, Flags: uapi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION}, nil, bytesOf(&resp))
	if !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("CQ_CREATE with IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION on rxe: %v, want EOPNOTSUPP", err)
	}
}
