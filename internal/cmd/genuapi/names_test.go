package main

import "testing"

func TestGoName(t *testing.T) {
	for c, want := range map[string]string{
		"ib_uverbs_ioctl_hdr":       "IBUverbsIoctlHdr",
		"rxe_queue_buf":             "RxeQueueBuf",
		"mlx5_ib_create_cq":         "Mlx5IBCreateCQ",
		"ib_uverbs_create_cq_resp":  "IBUverbsCreateCQResp",
		"ib_uverbs_ex_query_device": "IBUverbsExQueryDevice",
		"mminfo":                    "Mminfo",
		"rxe_gid":                   "RxeGID",
		"producer_index":            "ProducerIndex",
		"qp_num":                    "QPNum",
		"wr_id":                     "WRID",
		"driver_id":                 "DriverID",
		"log2_elem_size":            "Log2ElemSize",
		"cq_handle":                 "CQHandle",
		"mmap_info_addr":            "MmapInfoAddr",
		"bf_reg_size":               "BFRegSize",
		"cqe_version":               "CQEVersion",
		"_sockaddr_in":              "SockaddrIn",
		"resp_v2":                   "RespV2",
		"mlx5_cqe64":                "Mlx5CQE64",
		"mlx5_err_cqe":              "Mlx5ErrCQE",
		"mlx5_wqe_ctrl_seg":         "Mlx5WqeCtrlSeg",
		"rdma_ucm_create_id":        "RDMAUCMCreateID",
		"rdma_ucm_event_resp":       "RDMAUCMEventResp",
	} {
		if got := goName(c); got != want {
			t.Errorf("goName(%q) = %q, want %q", c, got, want)
		}
	}
}
