package transport

// Kernel names the transport frames with, from <rdma/rdma_user_ioctl.h>,
// <rdma/rdma_user_ioctl_cmds.h>, <rdma/ib_user_ioctl_cmds.h> and
// <rdma/ib_user_verbs.h>.
// TODO(uapi): alias these to the generated uapi package.
const (
	rdmaVerbsIoctl = 0xc0181b01 // RDMA_VERBS_IOCTL

	attrFMandatory   = 1 << 0 // UVERBS_ATTR_F_MANDATORY
	attrFValidOutput = 1 << 1 // UVERBS_ATTR_F_VALID_OUTPUT

	objectDevice      = 0 // UVERBS_OBJECT_DEVICE
	methodInvokeWrite = 0 // UVERBS_METHOD_INVOKE_WRITE
	attrCoreIn        = 0 // UVERBS_ATTR_CORE_IN
	attrCoreOut       = 1 // UVERBS_ATTR_CORE_OUT
	attrWriteCmd      = 2 // UVERBS_ATTR_WRITE_CMD

	// UVERBS_ATTR_UHW_IN and UVERBS_ATTR_UHW_OUT
	AttrUHWIn  = 0x1000
	AttrUHWOut = 0x1001

	cmdFlagExtended = 0x80000000 // IB_USER_VERBS_CMD_FLAG_EXTENDED
	cmdQueryDevice  = 1          // IB_USER_VERBS_CMD_QUERY_DEVICE
)
