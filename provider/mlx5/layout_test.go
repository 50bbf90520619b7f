package mlx5

import (
	"testing"
	"unsafe"

	"github.com/goverbs/goverbs/uapi"
)

// TestLayout holds every offset and value the provider uses to the Go
// mirrors of mlx5dv.h, which uapi's own layout test holds to the C
// compiler's answers (uapi/testdata/mlx5dv.golden).
func TestLayout(t *testing.T) {
	var cqe uapi.Mlx5CQE64
	var ecqe uapi.Mlx5ErrCQE
	var ctrl uapi.Mlx5WqeCtrlSeg
	var raddr uapi.Mlx5WqeRaddrSeg
	var atomic uapi.Mlx5WqeAtomicSeg
	var data uapi.Mlx5WqeDataSeg
	var av uapi.Mlx5WqeAv
	var umr uapi.Mlx5WqeUmrCtrlSeg
	var mkey uapi.Mlx5WqeMkeyContextSeg
	var klm uapi.Mlx5WqeUmrKlmSeg
	for _, c := range []struct {
		name      string
		ours, hdr uintptr
	}{
		{"sizeof(struct mlx5_cqe64)", cqeSize64, unsafe.Sizeof(cqe)},
		{"mlx5_cqe64.ml_path", cqeMLPath, unsafe.Offsetof(cqe.MlPath)},
		{"mlx5_cqe64.slid", cqeSLID, unsafe.Offsetof(cqe.Slid)},
		{"mlx5_cqe64.flags_rqpn", cqeFlagsRQPN, unsafe.Offsetof(cqe.FlagsRqpn)},
		{"mlx5_cqe64.srqn_uidx", cqeSRQNUIdx, unsafe.Offsetof(cqe.SrqnUIDX)},
		{"mlx5_cqe64.imm_inval_pkey", cqeImmInvalPKey, unsafe.Offsetof(cqe.ImmInvalPkey)},
		{"mlx5_cqe64.byte_cnt", cqeByteCnt, unsafe.Offsetof(cqe.ByteCnt)},
		{"mlx5_cqe64.timestamp", cqeTimestamp, unsafe.Offsetof(cqe.Timestamp)},
		{"mlx5_cqe64.sop_drop_qpn", cqeSopDropQPN, unsafe.Offsetof(cqe.SopDropQPN)},
		{"mlx5_cqe64.wqe_counter", cqeWQECounter, unsafe.Offsetof(cqe.WqeCounter)},
		{"mlx5_cqe64.op_own", cqeOpOwn, unsafe.Offsetof(cqe.OpOwn)},
		{"sizeof(struct mlx5_err_cqe)", cqeSize64, unsafe.Sizeof(ecqe)},
		{"mlx5_err_cqe.srqn", cqeSRQNUIdx, unsafe.Offsetof(ecqe.Srqn)},
		{"mlx5_err_cqe.vendor_err_synd", cqeVendorErrSynd, unsafe.Offsetof(ecqe.VendorErrSynd)},
		{"mlx5_err_cqe.syndrome", cqeSyndrome, unsafe.Offsetof(ecqe.Syndrome)},
		{"mlx5_err_cqe.s_wqe_opcode_qpn", cqeSopDropQPN, unsafe.Offsetof(ecqe.SWqeOpcodeQPN)},
		{"mlx5_err_cqe.wqe_counter", cqeWQECounter, unsafe.Offsetof(ecqe.WqeCounter)},
		{"mlx5_err_cqe.op_own", cqeOpOwn, unsafe.Offsetof(ecqe.OpOwn)},

		{"sizeof(struct mlx5_wqe_ctrl_seg)", ctrlSize, unsafe.Sizeof(ctrl)},
		{"mlx5_wqe_ctrl_seg.opmod_idx_opcode", ctrlOpmodIdxOpcode, unsafe.Offsetof(ctrl.OpmodIdxOpcode)},
		{"mlx5_wqe_ctrl_seg.qpn_ds", ctrlQPNDS, unsafe.Offsetof(ctrl.QPNDs)},
		{"mlx5_wqe_ctrl_seg.signature", ctrlSignature, unsafe.Offsetof(ctrl.Signature)},
		{"mlx5_wqe_ctrl_seg.fm_ce_se", ctrlFMCESE, unsafe.Offsetof(ctrl.FmCeSe)},
		{"mlx5_wqe_ctrl_seg.imm", ctrlImm, unsafe.Offsetof(ctrl.Imm)},
		{"sizeof(struct mlx5_wqe_raddr_seg)", raddrSize, unsafe.Sizeof(raddr)},
		{"mlx5_wqe_raddr_seg.raddr", raddrAddr, unsafe.Offsetof(raddr.Raddr)},
		{"mlx5_wqe_raddr_seg.rkey", raddrRKey, unsafe.Offsetof(raddr.Rkey)},
		{"sizeof(struct mlx5_wqe_atomic_seg)", atomicSize, unsafe.Sizeof(atomic)},
		{"mlx5_wqe_atomic_seg.swap_add", atomicSwapAdd, unsafe.Offsetof(atomic.SwapAdd)},
		{"mlx5_wqe_atomic_seg.compare", atomicCompare, unsafe.Offsetof(atomic.Compare)},
		{"sizeof(struct mlx5_wqe_data_seg)", dataSize, unsafe.Sizeof(data)},
		{"mlx5_wqe_data_seg.byte_count", dataByteCount, unsafe.Offsetof(data.ByteCount)},
		{"mlx5_wqe_data_seg.lkey", dataLKey, unsafe.Offsetof(data.Lkey)},
		{"mlx5_wqe_data_seg.addr", dataAddr, unsafe.Offsetof(data.Addr)},
		{"sizeof(struct mlx5_wqe_inl_data_seg)", inlineHeader, unsafe.Sizeof(uapi.Mlx5WqeInlDataSeg{})},
		{"sizeof(struct mlx5_wqe_av)", avSize, unsafe.Sizeof(av)},
		{"sizeof(struct mlx5_wqe_datagram_seg)", avSize, unsafe.Sizeof(uapi.Mlx5WqeDatagramSeg{})},
		{"mlx5_wqe_av.key.qkey.qkey", avQKey, uapi.OffsetMlx5WqeAvQkey},
		{"mlx5_wqe_av.dqp_dct", avDQPDCT, unsafe.Offsetof(av.DqpDct)},
		{"mlx5_wqe_av.stat_rate_sl", avStatRateSL, unsafe.Offsetof(av.StatRateSl)},
		{"mlx5_wqe_av.fl_mlid", avFLMLID, unsafe.Offsetof(av.FlMlid)},
		{"mlx5_wqe_av.rlid", avRLID, unsafe.Offsetof(av.Rlid)},
		{"mlx5_wqe_av.rmac", avRMAC, unsafe.Offsetof(av.Rmac)},
		{"mlx5_wqe_av.tclass", avTClass, unsafe.Offsetof(av.Tclass)},
		{"mlx5_wqe_av.hop_limit", avHopLimit, unsafe.Offsetof(av.HopLimit)},
		{"mlx5_wqe_av.grh_gid_fl", avGRHGIDFL, unsafe.Offsetof(av.GrhGIDFl)},
		{"mlx5_wqe_av.rgid", avRGID, unsafe.Offsetof(av.Rgid)},

		{"sizeof(struct mlx5_wqe_umr_ctrl_seg)", umrCtrlSize, unsafe.Sizeof(umr)},
		{"mlx5_wqe_umr_ctrl_seg.flags", umrFlags, unsafe.Offsetof(umr.Flags)},
		{"mlx5_wqe_umr_ctrl_seg.klm_octowords", umrKLMOctowords, unsafe.Offsetof(umr.KlmOctowords)},
		{"mlx5_wqe_umr_ctrl_seg.mkey_mask", umrMkeyMask, unsafe.Offsetof(umr.MkeyMask)},
		{"sizeof(struct mlx5_wqe_mkey_context_seg)", mkeyCtxSize, unsafe.Sizeof(mkey)},
		{"mlx5_wqe_mkey_context_seg.free", mkeyFree, unsafe.Offsetof(mkey.Free)},
		{"mlx5_wqe_mkey_context_seg.access_flags", mkeyAccessFlags, unsafe.Offsetof(mkey.AccessFlags)},
		{"mlx5_wqe_mkey_context_seg.qpn_mkey", mkeyQPNMkey, unsafe.Offsetof(mkey.QPNMkey)},
		{"mlx5_wqe_mkey_context_seg.start_addr", mkeyStartAddr, unsafe.Offsetof(mkey.StartAddr)},
		{"mlx5_wqe_mkey_context_seg.len", mkeyLen, unsafe.Offsetof(mkey.Len)},
		{"mlx5_wqe_umr_klm_seg.byte_count", klmByteCount, unsafe.Offsetof(klm.ByteCount)},
		{"mlx5_wqe_umr_klm_seg.mkey", klmMkey, unsafe.Offsetof(klm.Mkey)},
		{"mlx5_wqe_umr_klm_seg.address", klmAddress, unsafe.Offsetof(klm.Address)},
		{"MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN", umrFlagCheckQPN, uapi.MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN},
		{"MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET", umrFlagTransOffset, uapi.MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET},
		{"MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE", umrFlagCheckFree, uapi.MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE},
		{"MLX5_WQE_UMR_CTRL_FLAG_INLINE", umrFlagInline, uapi.MLX5_WQE_UMR_CTRL_FLAG_INLINE},
		{"MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN", umrMaskLen, uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_LEN},
		{"MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR", umrMaskStartAddr, uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_START_ADDR},
		{"MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY", umrMaskMkey, uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_MKEY},
		{"MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN", umrMaskQPN, uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_QPN},
		{"MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE", umrMaskLocalWrite, uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_LOCAL_WRITE},
		{"MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ", umrMaskRemoteRead, uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_READ},
		{"MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE", umrMaskRemoteWrite, uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_REMOTE_WRITE},
		{"MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC", umrMaskAtomic, uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_ACCESS_ATOMIC},
		{"MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE", umrMaskFree, uapi.MLX5_WQE_UMR_CTRL_MKEY_MASK_FREE},
		{"MLX5_WQE_MKEY_CONTEXT_FREE", mkeyFreeBit, uapi.MLX5_WQE_MKEY_CONTEXT_FREE},
		{"MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE", mkeyAccessLocalWrite, uapi.MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE},
		{"MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ", mkeyAccessRemoteRead, uapi.MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ},
		{"MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE", mkeyAccessRemoteWrt, uapi.MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE},
		{"MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC", mkeyAccessAtomic, uapi.MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC},
		{"MLX5_OPCODE_UMR", opUMR, uapi.MLX5_OPCODE_UMR},
		{"MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE", ctrlSmallFence, uapi.MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE},

		{"MLX5_CQE_OWNER_MASK", cqeOwnerMask, uapi.MLX5_CQE_OWNER_MASK},
		{"MLX5_CQE_REQ", cqeReq, uapi.MLX5_CQE_REQ},
		{"MLX5_CQE_RESP_WR_IMM", cqeRespWRImm, uapi.MLX5_CQE_RESP_WR_IMM},
		{"MLX5_CQE_RESP_SEND", cqeRespSend, uapi.MLX5_CQE_RESP_SEND},
		{"MLX5_CQE_RESP_SEND_IMM", cqeRespSendImm, uapi.MLX5_CQE_RESP_SEND_IMM},
		{"MLX5_CQE_RESP_SEND_INV", cqeRespSendInv, uapi.MLX5_CQE_RESP_SEND_INV},
		{"MLX5_CQE_RESIZE_CQ", cqeResizeCQ, uapi.MLX5_CQE_RESIZE_CQ},
		{"MLX5_CQE_NO_PACKET", cqeNoPacket, uapi.MLX5_CQE_NO_PACKET},
		{"MLX5_CQE_SIG_ERR", cqeSigErr, uapi.MLX5_CQE_SIG_ERR},
		{"MLX5_CQE_REQ_ERR", cqeReqErr, uapi.MLX5_CQE_REQ_ERR},
		{"MLX5_CQE_RESP_ERR", cqeRespErr, uapi.MLX5_CQE_RESP_ERR},
		{"MLX5_CQE_INVALID", cqeInvalid, uapi.MLX5_CQE_INVALID},
		{"MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR", syndLocalLength, uapi.MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR},
		{"MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR", syndLocalQPOp, uapi.MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR},
		{"MLX5_CQE_SYNDROME_LOCAL_PROT_ERR", syndLocalProt, uapi.MLX5_CQE_SYNDROME_LOCAL_PROT_ERR},
		{"MLX5_CQE_SYNDROME_WR_FLUSH_ERR", syndWRFlush, uapi.MLX5_CQE_SYNDROME_WR_FLUSH_ERR},
		{"MLX5_CQE_SYNDROME_MW_BIND_ERR", syndMWBind, uapi.MLX5_CQE_SYNDROME_MW_BIND_ERR},
		{"MLX5_CQE_SYNDROME_BAD_RESP_ERR", syndBadResp, uapi.MLX5_CQE_SYNDROME_BAD_RESP_ERR},
		{"MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR", syndLocalAccess, uapi.MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR},
		{"MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR", syndRemoteInvalidReq, uapi.MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR},
		{"MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR", syndRemoteAccess, uapi.MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR},
		{"MLX5_CQE_SYNDROME_REMOTE_OP_ERR", syndRemoteOp, uapi.MLX5_CQE_SYNDROME_REMOTE_OP_ERR},
		{"MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR", syndTransportRetryExc, uapi.MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR},
		{"MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR", syndRNRRetryExc, uapi.MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR},
		{"MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR", syndRemoteAbortedError, uapi.MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR},
		{"MLX5_OPCODE_NOP", opNop, uapi.MLX5_OPCODE_NOP},
		{"MLX5_OPCODE_SEND_INVAL", opSendInval, uapi.MLX5_OPCODE_SEND_INVAL},
		{"MLX5_OPCODE_RDMA_WRITE", opRDMAWrite, uapi.MLX5_OPCODE_RDMA_WRITE},
		{"MLX5_OPCODE_RDMA_WRITE_IMM", opRDMAWriteImm, uapi.MLX5_OPCODE_RDMA_WRITE_IMM},
		{"MLX5_OPCODE_SEND", opSend, uapi.MLX5_OPCODE_SEND},
		{"MLX5_OPCODE_SEND_IMM", opSendImm, uapi.MLX5_OPCODE_SEND_IMM},
		{"MLX5_OPCODE_RDMA_READ", opRDMARead, uapi.MLX5_OPCODE_RDMA_READ},
		{"MLX5_OPCODE_ATOMIC_CS", opAtomicCS, uapi.MLX5_OPCODE_ATOMIC_CS},
		{"MLX5_OPCODE_ATOMIC_FA", opAtomicFA, uapi.MLX5_OPCODE_ATOMIC_FA},
		{"MLX5_WQE_CTRL_CQ_UPDATE", ctrlCQUpdate, uapi.MLX5_WQE_CTRL_CQ_UPDATE},
		{"MLX5_WQE_CTRL_SOLICITED", ctrlSolicited, uapi.MLX5_WQE_CTRL_SOLICITED},
		{"MLX5_WQE_CTRL_FENCE", ctrlFence, uapi.MLX5_WQE_CTRL_FENCE},
		{"MLX5_SEND_WQE_BB", sendWQEBB, uapi.MLX5_SEND_WQE_BB},
		{"MLX5_SEND_WQE_SHIFT", sendWQEBBLg, uapi.MLX5_SEND_WQE_SHIFT},
		{"MLX5_INLINE_SEG", inlineSeg, uapi.MLX5_INLINE_SEG},
		{"MLX5_INVALID_LKEY", invalidLKey, uapi.MLX5_INVALID_LKEY},
		{"MLX5_EXTENDED_UD_AV", extendedUDAV, uapi.MLX5_EXTENDED_UD_AV},
		{"MLX5_CQ_DOORBELL", cqDoorbell, uapi.MLX5_CQ_DOORBELL},
		{"MLX5_CQ_DB_REQ_NOT", cqDBReqNot, uapi.MLX5_CQ_DB_REQ_NOT},
		{"MLX5_CQ_DB_REQ_NOT_SOL", cqDBReqNotSol, uapi.MLX5_CQ_DB_REQ_NOT_SOL},
		{"MLX5_RCV_DBR (as bytes)", dbrecRecv, uapi.MLX5_RCV_DBR * 4},
		{"MLX5_SND_DBR (as bytes)", dbrecSend, uapi.MLX5_SND_DBR * 4},
	} {
		if c.ours != c.hdr {
			t.Errorf("%s: provider uses %#x, the header says %#x", c.name, c.ours, c.hdr)
		}
	}
}
