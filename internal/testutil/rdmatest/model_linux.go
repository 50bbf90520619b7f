package rdmatest

import (
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/goverbs/goverbs/internal/devhook"
	"github.com/goverbs/goverbs/internal/mlx5model"
	"github.com/goverbs/goverbs/uapi"
	"github.com/goverbs/goverbs/uverbs"
)

// EnvDevice names the device the tests run on: rxe0 (the default, in the
// VM harness) or mlx5model (the in-process mlx5 device model).
const EnvDevice = "GOVERBS_TEST_DEVICE"

// EnvModelOptions holds the model's options (see the package doc).
const EnvModelOptions = "GOVERBS_MLX5MODEL"

// ModelDevice is the value of EnvDevice that selects the mlx5 model.
const ModelDevice = "mlx5model"

// EnvGIDIndex picks the GID index loopback connections use (default 1,
// rxe's and the model's RoCE v2 IPv4 GID); on hardware, the index of a
// RoCE v2 GID of an address the port has (see show_gids).
const EnvGIDIndex = "GOVERBS_TEST_GID_INDEX"

// GIDIndex returns the GID index the tests connect over.
func GIDIndex() int {
	if v, err := strconv.Atoi(os.Getenv(EnvGIDIndex)); err == nil && v >= 0 && v < 256 {
		return v
	}
	return 1
}

// OnModel reports whether the tests run on the mlx5 device model.
func OnModel() bool { return os.Getenv(EnvDevice) == ModelDevice }

// DeviceName is the name of the device the tests open.
func DeviceName() string {
	switch d := os.Getenv(EnvDevice); d {
	case "":
		return "rxe0"
	case ModelDevice:
		return "mlx5_0"
	default:
		return d
	}
}

// Provider names the provider the tests run through: "rxe" or "mlx5".
func Provider(tb testing.TB) string {
	if OnModel() || strings.HasPrefix(DeviceName(), "mlx5") {
		return "mlx5"
	}
	return "rxe"
}

// SkipUnless skips the test unless it runs through provider, saying why:
// for tests that pin one provider's (or kernel's) behaviour.
func SkipUnless(tb testing.TB, provider, why string) {
	tb.Helper()
	if p := Provider(tb); p != provider {
		tb.Skipf("%s only, this runs on %s (%s): %s", provider, DeviceName(), p, why)
	}
}

// AtomicOrder is the byte order the device's atomics see memory in: the
// host's on rxe, big-endian on mlx5 (the device reads and writes the
// 8-byte target, and the original value it returns, in network order).
func AtomicOrder(tb testing.TB) binary.ByteOrder {
	if Provider(tb) == "mlx5" {
		return binary.BigEndian
	}
	return binary.NativeEndian
}

// modelOptions parses EnvModelOptions.
func modelOptions(tb testing.TB) mlx5model.Options {
	tb.Helper()
	var o mlx5model.Options
	for _, f := range strings.Split(os.Getenv(EnvModelOptions), ",") {
		switch strings.TrimSpace(f) {
		case "":
		case "static":
			o.StaticUAR = true
		case "refusedyn":
			o.StaticUAR, o.RefuseDynUAR = true, true
		case "cqe0":
			o.CQEVersion0 = true
		case "armpending":
			o.ArmFiresOnPending = true
		case "realtime":
			o.RealTimeClock = true
		default:
			tb.Fatalf("%s=%q: unknown option %q", EnvModelOptions, os.Getenv(EnvModelOptions), f)
		}
	}
	return o
}

// models holds each test's model device and its last opened context.
var models sync.Map // testing.TB -> *modelFix

type modelFix struct {
	dev *mlx5model.Device
	ctx *uverbs.Context
}

// Model returns the test's mlx5 model device, starting it on first use;
// when the test ends it stops, and its violations fail the test. Only on
// the model (OnModel).
func Model(tb testing.TB) *mlx5model.Device {
	tb.Helper()
	if !OnModel() {
		tb.Fatalf("rdmatest.Model: %s is not %s", EnvDevice, ModelDevice)
	}
	if f, ok := models.Load(tb); ok {
		return f.(*modelFix).dev
	}
	dev := mlx5model.New(modelOptions(tb))
	models.Store(tb, &modelFix{dev: dev})
	tb.Cleanup(func() {
		models.Delete(tb)
		if err := dev.Close(); err != nil {
			tb.Errorf("the mlx5 model found the provider at fault:\n%v", err)
		}
	})
	return dev
}

// openModel opens a context on the test's model device.
func openModel(tb testing.TB) *uverbs.Context {
	tb.Helper()
	dev := Model(tb)
	mc, err := dev.NewContext()
	if err != nil {
		tb.Fatal(err)
	}
	x, err := devhook.Open(DeviceName(), uapi.RDMA_DRIVER_MLX5, mc.FD(), mc)
	if errors.Is(err, errors.ErrUnsupported) {
		// The provider refuses this GOARCH (no device barriers it can
		// stand behind: s390x, arm, mips), the model's device included.
		mc.Close()
		tb.Skipf("the mlx5 model cannot run on %s: %v", runtime.GOARCH, err)
	}
	if err != nil {
		mc.Close()
		tb.Fatal(err)
	}
	c, ok := x.(*uverbs.Context)
	if !ok {
		tb.Fatalf("devhook.Open returned %T", x)
	}
	if f, ok := models.Load(tb); ok {
		f.(*modelFix).ctx = c
	}
	tb.Cleanup(func() {
		c.Close()
		mc.Close()
	})
	return c
}

// modelGID reads GID index i of port 1 from the test's model context (or
// a context opened for the purpose).
func modelGID(tb testing.TB, i int) uverbs.GID {
	tb.Helper()
	var c *uverbs.Context
	if f, ok := models.Load(tb); ok {
		c = f.(*modelFix).ctx
	}
	if c == nil {
		c = openModel(tb)
	}
	e, err := c.QueryGID(1, i)
	if err != nil {
		tb.Fatal(err)
	}
	return e.GID
}
