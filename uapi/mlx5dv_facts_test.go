package uapi

import (
	"testing"
	"unsafe"
)

// TestMlx5DVFacts checks the mlx5 ring formats that the provider relies
// on, as docs/rdma-facts.md (section 4) gives them, against the names
// generated from mlx5dv.h.
func TestMlx5DVFacts(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		// The 64-byte CQE and its error form (4.3).
		{"sizeof(struct mlx5_cqe64)", uint64(unsafe.Sizeof(Mlx5CQE64{})), 64},
		{"offsetof(struct mlx5_cqe64, wqe_id)", uint64(unsafe.Offsetof(Mlx5CQE64{}.WqeID)), 2},
		{"offsetof(struct mlx5_cqe64, ml_path)", uint64(unsafe.Offsetof(Mlx5CQE64{}.MlPath)), 17},
		{"offsetof(struct mlx5_cqe64, slid)", uint64(unsafe.Offsetof(Mlx5CQE64{}.Slid)), 22},
		{"offsetof(struct mlx5_cqe64, flags_rqpn)", uint64(unsafe.Offsetof(Mlx5CQE64{}.FlagsRqpn)), 24},
		{"offsetof(struct mlx5_cqe64, srqn_uidx)", uint64(unsafe.Offsetof(Mlx5CQE64{}.SrqnUIDX)), 32},
		{"offsetof(struct mlx5_cqe64, imm_inval_pkey)", uint64(unsafe.Offsetof(Mlx5CQE64{}.ImmInvalPkey)), 36},
		{"offsetof(struct mlx5_cqe64, byte_cnt)", uint64(unsafe.Offsetof(Mlx5CQE64{}.ByteCnt)), 44},
		{"offsetof(struct mlx5_cqe64, timestamp)", uint64(unsafe.Offsetof(Mlx5CQE64{}.Timestamp)), 48},
		{"offsetof(struct mlx5_cqe64, sop_drop_qpn)", uint64(unsafe.Offsetof(Mlx5CQE64{}.SopDropQPN)), 56},
		{"offsetof(struct mlx5_cqe64, wqe_counter)", uint64(unsafe.Offsetof(Mlx5CQE64{}.WqeCounter)), 60},
		{"offsetof(struct mlx5_cqe64, op_own)", uint64(unsafe.Offsetof(Mlx5CQE64{}.OpOwn)), 63},
		{"sizeof(struct mlx5_err_cqe)", uint64(unsafe.Sizeof(Mlx5ErrCQE{})), 64},
		{"offsetof(struct mlx5_err_cqe, srqn)", uint64(unsafe.Offsetof(Mlx5ErrCQE{}.Srqn)), 32},
		{"offsetof(struct mlx5_err_cqe, vendor_err_synd)", uint64(unsafe.Offsetof(Mlx5ErrCQE{}.VendorErrSynd)), 54},
		{"offsetof(struct mlx5_err_cqe, syndrome)", uint64(unsafe.Offsetof(Mlx5ErrCQE{}.Syndrome)), 55},
		{"offsetof(struct mlx5_err_cqe, s_wqe_opcode_qpn)", uint64(unsafe.Offsetof(Mlx5ErrCQE{}.SWqeOpcodeQPN)), 56},
		{"offsetof(struct mlx5_err_cqe, wqe_counter)", uint64(unsafe.Offsetof(Mlx5ErrCQE{}.WqeCounter)), 60},
		{"offsetof(struct mlx5_err_cqe, op_own)", uint64(unsafe.Offsetof(Mlx5ErrCQE{}.OpOwn)), 63},
		{"MLX5_CQE_REQ", MLX5_CQE_REQ, 0},
		{"MLX5_CQE_RESP_WR_IMM", MLX5_CQE_RESP_WR_IMM, 1},
		{"MLX5_CQE_RESP_SEND", MLX5_CQE_RESP_SEND, 2},
		{"MLX5_CQE_RESP_SEND_IMM", MLX5_CQE_RESP_SEND_IMM, 3},
		{"MLX5_CQE_RESP_SEND_INV", MLX5_CQE_RESP_SEND_INV, 4},
		{"MLX5_CQE_RESIZE_CQ", MLX5_CQE_RESIZE_CQ, 5},
		{"MLX5_CQE_NO_PACKET", MLX5_CQE_NO_PACKET, 6},
		{"MLX5_CQE_SIG_ERR", MLX5_CQE_SIG_ERR, 12},
		{"MLX5_CQE_REQ_ERR", MLX5_CQE_REQ_ERR, 13},
		{"MLX5_CQE_RESP_ERR", MLX5_CQE_RESP_ERR, 14},
		{"MLX5_CQE_INVALID", MLX5_CQE_INVALID, 15},
		{"MLX5_CQE_OWNER_MASK", MLX5_CQE_OWNER_MASK, 1},
		{"MLX5_CQE_SYNDROME_WR_FLUSH_ERR", MLX5_CQE_SYNDROME_WR_FLUSH_ERR, 0x05},
		{"MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR", MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR, 0x22},
		// The CQ doorbell (4.5).
		{"MLX5_CQ_DOORBELL", MLX5_CQ_DOORBELL, 0x20},
		{"MLX5_CQ_DB_REQ_NOT", MLX5_CQ_DB_REQ_NOT, 0},
		{"MLX5_CQ_DB_REQ_NOT_SOL", MLX5_CQ_DB_REQ_NOT_SOL, 1 << 24},
		// The send and receive queues (4.7).
		{"sizeof(struct mlx5_wqe_ctrl_seg)", uint64(unsafe.Sizeof(Mlx5WqeCtrlSeg{})), 16},
		{"offsetof(struct mlx5_wqe_ctrl_seg, qpn_ds)", uint64(unsafe.Offsetof(Mlx5WqeCtrlSeg{}.QPNDs)), 4},
		{"offsetof(struct mlx5_wqe_ctrl_seg, signature)", uint64(unsafe.Offsetof(Mlx5WqeCtrlSeg{}.Signature)), 8},
		{"offsetof(struct mlx5_wqe_ctrl_seg, fm_ce_se)", uint64(unsafe.Offsetof(Mlx5WqeCtrlSeg{}.FmCeSe)), 11},
		{"offsetof(struct mlx5_wqe_ctrl_seg, imm)", uint64(unsafe.Offsetof(Mlx5WqeCtrlSeg{}.Imm)), 12},
		{"sizeof(struct mlx5_wqe_raddr_seg)", uint64(unsafe.Sizeof(Mlx5WqeRaddrSeg{})), 16},
		{"offsetof(struct mlx5_wqe_raddr_seg, rkey)", uint64(unsafe.Offsetof(Mlx5WqeRaddrSeg{}.Rkey)), 8},
		{"sizeof(struct mlx5_wqe_atomic_seg)", uint64(unsafe.Sizeof(Mlx5WqeAtomicSeg{})), 16},
		{"sizeof(struct mlx5_wqe_data_seg)", uint64(unsafe.Sizeof(Mlx5WqeDataSeg{})), 16},
		{"offsetof(struct mlx5_wqe_data_seg, lkey)", uint64(unsafe.Offsetof(Mlx5WqeDataSeg{}.Lkey)), 4},
		{"offsetof(struct mlx5_wqe_data_seg, addr)", uint64(unsafe.Offsetof(Mlx5WqeDataSeg{}.Addr)), 8},
		{"sizeof(struct mlx5_wqe_datagram_seg)", uint64(unsafe.Sizeof(Mlx5WqeDatagramSeg{})), 48},
		{"offsetof(struct mlx5_wqe_datagram_seg, av)", uint64(unsafe.Offsetof(Mlx5WqeDatagramSeg{}.Av)), 0},
		{"offsetof(struct mlx5_wqe_av, key.qkey.qkey)", OffsetMlx5WqeAvQkey, 0},
		{"offsetof(struct mlx5_wqe_av, dqp_dct)", uint64(unsafe.Offsetof(Mlx5WqeAv{}.DqpDct)), 8},
		{"offsetof(struct mlx5_wqe_av, stat_rate_sl)", uint64(unsafe.Offsetof(Mlx5WqeAv{}.StatRateSl)), 12},
		{"offsetof(struct mlx5_wqe_av, fl_mlid)", uint64(unsafe.Offsetof(Mlx5WqeAv{}.FlMlid)), 13},
		{"offsetof(struct mlx5_wqe_av, rlid)", uint64(unsafe.Offsetof(Mlx5WqeAv{}.Rlid)), 14},
		{"offsetof(struct mlx5_wqe_av, rmac)", uint64(unsafe.Offsetof(Mlx5WqeAv{}.Rmac)), 20},
		{"offsetof(struct mlx5_wqe_av, tclass)", uint64(unsafe.Offsetof(Mlx5WqeAv{}.Tclass)), 26},
		{"offsetof(struct mlx5_wqe_av, hop_limit)", uint64(unsafe.Offsetof(Mlx5WqeAv{}.HopLimit)), 27},
		{"offsetof(struct mlx5_wqe_av, grh_gid_fl)", uint64(unsafe.Offsetof(Mlx5WqeAv{}.GrhGIDFl)), 28},
		{"offsetof(struct mlx5_wqe_av, rgid)", uint64(unsafe.Offsetof(Mlx5WqeAv{}.Rgid)), 32},
		{"MLX5_EXTENDED_UD_AV", MLX5_EXTENDED_UD_AV, 0x80000000},
		{"MLX5_INVALID_LKEY", MLX5_INVALID_LKEY, 0x100},
		{"MLX5_WQE_CTRL_CQ_UPDATE", MLX5_WQE_CTRL_CQ_UPDATE, 0x08},
		{"MLX5_WQE_CTRL_SOLICITED", MLX5_WQE_CTRL_SOLICITED, 0x02},
		{"MLX5_WQE_CTRL_FENCE", MLX5_WQE_CTRL_FENCE, 0x80},
		{"MLX5_SEND_WQE_BB", MLX5_SEND_WQE_BB, 64},
		{"MLX5_SEND_WQE_SHIFT", MLX5_SEND_WQE_SHIFT, 6},
		{"MLX5_RCV_DBR", MLX5_RCV_DBR, 0},
		{"MLX5_SND_DBR", MLX5_SND_DBR, 1},
		{"MLX5_OPCODE_SEND_INVAL", MLX5_OPCODE_SEND_INVAL, 0x01},
		{"MLX5_OPCODE_RDMA_WRITE", MLX5_OPCODE_RDMA_WRITE, 0x08},
		{"MLX5_OPCODE_RDMA_WRITE_IMM", MLX5_OPCODE_RDMA_WRITE_IMM, 0x09},
		{"MLX5_OPCODE_SEND", MLX5_OPCODE_SEND, 0x0a},
		{"MLX5_OPCODE_SEND_IMM", MLX5_OPCODE_SEND_IMM, 0x0b},
		{"MLX5_OPCODE_RDMA_READ", MLX5_OPCODE_RDMA_READ, 0x10},
		{"MLX5_OPCODE_ATOMIC_CS", MLX5_OPCODE_ATOMIC_CS, 0x11},
		{"MLX5_OPCODE_ATOMIC_FA", MLX5_OPCODE_ATOMIC_FA, 0x12},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}
