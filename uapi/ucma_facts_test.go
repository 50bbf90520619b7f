package uapi

import (
	"testing"
	"unsafe"
)

// TestUCMAFacts checks the rdma_cm numbers that internal/ucma relies on,
// from docs/rdmacm-facts.md (rdma-core 44's and Linux's headers), against
// the generated names: the command numbers, the sizes of the write
// commands' bodies and responses, and where the event response keeps its
// 4-byte aligned union. The layout test holds every member to C; this
// holds the C to what the facts say, on every GOARCH the tests run on.
func TestUCMAFacts(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"sizeof(struct rdma_ucm_cmd_hdr)", uint64(unsafe.Sizeof(RDMAUCMCmdHdr{})), 8},
		{"sizeof(struct rdma_ucm_create_id)", uint64(unsafe.Sizeof(RDMAUCMCreateID{})), 24},
		{"sizeof(struct rdma_ucm_create_id_resp)", uint64(unsafe.Sizeof(RDMAUCMCreateIDResp{})), 4},
		{"sizeof(struct rdma_ucm_destroy_id)", uint64(unsafe.Sizeof(RDMAUCMDestroyID{})), 16},
		{"sizeof(struct rdma_ucm_destroy_id_resp)", uint64(unsafe.Sizeof(RDMAUCMDestroyIDResp{})), 4},
		{"sizeof(struct rdma_ucm_bind)", uint64(unsafe.Sizeof(RDMAUCMBind{})), 136},
		{"sizeof(struct rdma_ucm_bind_ip)", uint64(unsafe.Sizeof(RDMAUCMBindIp{})), 40},
		{"sizeof(struct rdma_ucm_resolve_ip)", uint64(unsafe.Sizeof(RDMAUCMResolveIp{})), 64},
		{"sizeof(struct rdma_ucm_resolve_addr)", uint64(unsafe.Sizeof(RDMAUCMResolveAddr{})), 272},
		{"sizeof(struct rdma_ucm_resolve_route)", uint64(unsafe.Sizeof(RDMAUCMResolveRoute{})), 8},
		{"sizeof(struct rdma_ucm_query)", uint64(unsafe.Sizeof(RDMAUCMQuery{})), 16},
		{"sizeof(struct rdma_ucm_query_route_resp)", uint64(unsafe.Sizeof(RDMAUCMQueryRouteResp{})), 208},
		{"sizeof(struct rdma_ucm_query_addr_resp)", uint64(unsafe.Sizeof(RDMAUCMQueryAddrResp{})), 280},
		{"sizeof(struct rdma_ucm_query_path_resp)", uint64(unsafe.Sizeof(RDMAUCMQueryPathResp{})), 8},
		{"sizeof(struct ib_path_rec_data)", uint64(unsafe.Sizeof(IBPathRecData{})), 72},
		{"sizeof(struct rdma_ucm_conn_param)", uint64(unsafe.Sizeof(RDMAUCMConnParam{})), 272},
		{"sizeof(struct rdma_ucm_ud_param)", uint64(unsafe.Sizeof(RDMAUCMUdParam{})), 304},
		{"sizeof(struct rdma_ucm_connect)", uint64(unsafe.Sizeof(RDMAUCMConnect{})), 288},
		{"sizeof(struct rdma_ucm_listen)", uint64(unsafe.Sizeof(RDMAUCMListen{})), 8},
		{"sizeof(struct rdma_ucm_accept)", uint64(unsafe.Sizeof(RDMAUCMAccept{})), 296},
		{"sizeof(struct rdma_ucm_reject)", uint64(unsafe.Sizeof(RDMAUCMReject{})), 264},
		{"sizeof(struct rdma_ucm_disconnect)", uint64(unsafe.Sizeof(RDMAUCMDisconnect{})), 4},
		{"sizeof(struct rdma_ucm_init_qp_attr)", uint64(unsafe.Sizeof(RDMAUCMInitQPAttr{})), 16},
		{"sizeof(struct ib_uverbs_qp_attr)", uint64(unsafe.Sizeof(IBUverbsQPAttr{})), 144},
		{"sizeof(struct rdma_ucm_get_event)", uint64(unsafe.Sizeof(RDMAUCMGetEvent{})), 8},
		{"sizeof(struct rdma_ucm_event_resp)", uint64(unsafe.Sizeof(RDMAUCMEventResp{})), 336},
		{"offsetof(struct rdma_ucm_event_resp, param)", uint64(unsafe.Offsetof(RDMAUCMEventResp{}.Param)), 20},
		{"offsetof(struct rdma_ucm_event_resp, ece)", uint64(unsafe.Offsetof(RDMAUCMEventResp{}.Ece)), 328},
		{"sizeof(struct rdma_ucm_set_option)", uint64(unsafe.Sizeof(RDMAUCMSetOption{})), 24},
		{"sizeof(struct rdma_ucm_migrate_id)", uint64(unsafe.Sizeof(RDMAUCMMigrateID{})), 16},
		{"sizeof(struct rdma_ucm_notify)", uint64(unsafe.Sizeof(RDMAUCMNotify{})), 8},
		{"sizeof(struct rdma_ucm_join_mcast)", uint64(unsafe.Sizeof(RDMAUCMJoinMcast{})), 152},
		{"sizeof(struct sockaddr_in6)", uint64(unsafe.Sizeof(SockaddrIn6{})), 28},
		{"sizeof(struct __kernel_sockaddr_storage)", uint64(unsafe.Sizeof(KernelSockaddrStorage{})), 128},
		{"sizeof(struct sockaddr_ib)", uint64(unsafe.Sizeof(SockaddrIB{})), 48},
		{"RDMA_USER_CM_ABI_VERSION", RDMA_USER_CM_ABI_VERSION, 4},
		{"RDMA_USER_CM_CMD_GET_EVENT", RDMA_USER_CM_CMD_GET_EVENT, 12},
		{"RDMA_USER_CM_CMD_GET_OPTION", RDMA_USER_CM_CMD_GET_OPTION, 13},
		{"RDMA_USER_CM_CMD_QUERY", RDMA_USER_CM_CMD_QUERY, 19},
		{"RDMA_USER_CM_CMD_JOIN_MCAST", RDMA_USER_CM_CMD_JOIN_MCAST, 22},
		{"RDMA_PS_TCP", RDMA_PS_TCP, 0x106},
		{"RDMA_PS_UDP", RDMA_PS_UDP, 0x111},
		{"RDMA_PS_IPOIB", RDMA_PS_IPOIB, 0x2},
		{"RDMA_PS_IB", RDMA_PS_IB, 0x13f},
		{"RDMA_CM_EVENT_ADDR_RESOLVED", RDMA_CM_EVENT_ADDR_RESOLVED, 0},
		{"RDMA_CM_EVENT_CONNECT_REQUEST", RDMA_CM_EVENT_CONNECT_REQUEST, 4},
		{"RDMA_CM_EVENT_TIMEWAIT_EXIT", RDMA_CM_EVENT_TIMEWAIT_EXIT, 15},
		{"RDMA_OPTION_ID_ACK_TIMEOUT", RDMA_OPTION_ID_ACK_TIMEOUT, 3},
		{"AF_IB", AF_IB, 27},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}
