package good_test

import (
	"testing"

	"example.com/m/good"
)

func TestFence(t *testing.T) { good.Fence() }
