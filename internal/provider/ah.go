package provider

import "github.com/goverbs/goverbs/uapi"

// AHAttr is the kernel's address vector, struct ib_uverbs_ah_attr.
type AHAttr = uapi.IBUverbsAHAttr
