package rdmacm

import (
	"fmt"

	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

// The attribute-mask bits (enum ib_qp_attr_mask, the same as ibv's) that
// INIT_QP_ATTR may set and uverbs.QPAttr has no field for: refused, with
// an error that names them.
const (
	maskEnSQDAsyncNotify = 1 << 2
	maskAltPath          = 1 << 14
	maskPathMigState     = 1 << 18
	maskCap              = 1 << 19
	// maskIBQuirk are bits 21 to 24 (rate limit and the like), which
	// the kernel sets for RoCE and librdmacm takes off the RTR mask on
	// InfiniBand link layers.
	maskIBQuirk = 0xf << 21
	// maskCarried are the bits uverbs.QP.Modify carries.
	maskCarried = (1<<21 - 1) &^ (maskEnSQDAsyncNotify | maskAltPath | maskPathMigState | maskCap)
)

// qpAttrFromKernel converts INIT_QP_ATTR's answer (struct
// ib_uverbs_qp_attr and its mask) into what uverbs.QP.Modify takes.
// linkIB says the port's link layer is InfiniBand, where bits 21-24 are
// dropped from the RTR mask as librdmacm drops them. A bit that
// uverbs cannot carry is an error wrapping EINVAL.
func qpAttrFromKernel(k *uapi.IBUverbsQPAttr, mask uint32, linkIB bool) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	if linkIB && k.QPState == uint32(uverbs.QPRTR) {
		mask &^= maskIBQuirk
	}
	if extra := mask &^ maskCarried; extra != 0 {
		return uverbs.QPAttr{}, 0, fmt.Errorf("INIT_QP_ATTR to %v asks for attribute bits %#x (of mask %#x), which goverbs' modify qp does not carry: %w",
			uverbs.QPState(k.QPState), extra, mask, errInvalid)
	}
	a := uverbs.QPAttr{
		State:           uverbs.QPState(k.QPState),
		CurState:        uverbs.QPState(k.CurQPState),
		PathMTU:         uverbs.MTU(k.PathMTU),
		QKey:            k.Qkey,
		RQPSN:           k.RqPSN,
		SQPSN:           k.SqPSN,
		DestQPN:         k.DestQPNum,
		AccessFlags:     uverbs.Access(k.QPAccessFlags),
		AH:              ahAttrFromKernel(&k.AHAttr),
		PKeyIndex:       k.PkeyIndex,
		SQDraining:      k.SqDraining != 0,
		MaxRdAtomic:     k.MaxRdAtomic,
		MaxDestRdAtomic: k.MaxDestRdAtomic,
		MinRNRTimer:     k.MinRnrTimer,
		Port:            k.PortNum,
		Timeout:         k.Timeout,
		RetryCnt:        k.RetryCnt,
		RNRRetry:        k.RnrRetry,
	}
	return a, uverbs.QPAttrMask(mask), nil
}

// ahAttrFromKernel converts struct ib_uverbs_ah_attr.
func ahAttrFromKernel(ah *uapi.IBUverbsAHAttr) uverbs.AHAttr {
	return uverbs.AHAttr{
		GRH: uverbs.GlobalRoute{
			DGID:         uverbs.GID(ah.Grh.Dgid),
			FlowLabel:    ah.Grh.FlowLabel,
			SGIDIndex:    ah.Grh.SgidIndex,
			HopLimit:     ah.Grh.HopLimit,
			TrafficClass: ah.Grh.TrafficClass,
		},
		DLID:        ah.Dlid,
		SL:          ah.Sl,
		SrcPathBits: ah.SrcPathBits,
		StaticRate:  ah.StaticRate,
		IsGlobal:    ah.IsGlobal != 0,
		Port:        ah.PortNum,
	}
}
