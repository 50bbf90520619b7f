package transport

import "github.com/goverbs/goverbs/uapi"

// Kernel names the transport frames with.
const (
	rdmaVerbsIoctl = uapi.RDMA_VERBS_IOCTL

	attrFMandatory   = uapi.UVERBS_ATTR_F_MANDATORY
	attrFValidOutput = uapi.UVERBS_ATTR_F_VALID_OUTPUT

	objectDevice      = uapi.UVERBS_OBJECT_DEVICE
	methodInvokeWrite = uapi.UVERBS_METHOD_INVOKE_WRITE
	attrCoreIn        = uapi.UVERBS_ATTR_CORE_IN
	attrCoreOut       = uapi.UVERBS_ATTR_CORE_OUT
	attrWriteCmd      = uapi.UVERBS_ATTR_WRITE_CMD

	// AttrUHWIn and AttrUHWOut carry the driver's data (UVERBS_ATTR_UHW_IN/OUT).
	AttrUHWIn  = uapi.UVERBS_ATTR_UHW_IN
	AttrUHWOut = uapi.UVERBS_ATTR_UHW_OUT

	cmdFlagExtended = uapi.IB_USER_VERBS_CMD_FLAG_EXTENDED
	cmdQueryDevice  = uapi.IB_USER_VERBS_CMD_QUERY_DEVICE
)
