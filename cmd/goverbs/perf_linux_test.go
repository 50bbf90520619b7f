package main

import (
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/goverbs/goverbs/uapi"
)

// TestDefaultInline holds -I's default to perftest's: inline only on the
// devices perftest recognises (of goverbs' drivers, mlx5), and then only
// for the latency tests.
func TestDefaultInline(t *testing.T) {
	for _, tc := range []struct {
		driver uint32
		test   string
		want   int
	}{
		{uapi.RDMA_DRIVER_MLX5, "send_lat", 236},
		{uapi.RDMA_DRIVER_MLX5, "write_lat", 220},
		{uapi.RDMA_DRIVER_MLX5, "send_bw", 0},
		{uapi.RDMA_DRIVER_MLX5, "write_bw", 0},
		{uapi.RDMA_DRIVER_RXE, "send_lat", 0},
		{uapi.RDMA_DRIVER_RXE, "write_lat", 0},
		{uapi.RDMA_DRIVER_UNKNOWN, "send_lat", 0},
	} {
		if got := defaultInline(tc.driver, tc.test); got != tc.want {
			t.Errorf("driver %d, %s: %d bytes inline, want %d", tc.driver, tc.test, got, tc.want)
		}
	}
}

// TestCountsToDurations: the latency samples, kept as counts of the CPU's
// counter, become durations at the rate the run's span gives.
func TestCountsToDurations(t *testing.T) {
	for _, tc := range []struct {
		lat    []uint64
		d      time.Duration
		counts uint64
		want   []time.Duration
	}{
		{[]uint64{1000, 2500, 0}, time.Millisecond, 1_000_000, []time.Duration{1000, 2500, 0}}, // 1 GHz
		{[]uint64{1000, 2501}, time.Millisecond, 2_000_000, []time.Duration{500, 1251}},        // 2 GHz, rounded
		{[]uint64{625, 1}, 10 * time.Millisecond, 625_000, []time.Duration{10_000, 16}},        // arm64's 62.5 MHz
		{[]uint64{7, 8}, time.Millisecond, 0, []time.Duration{0, 0}},                           // no count: no division by zero
		{nil, time.Millisecond, 1, []time.Duration{}},
	} {
		if got := countsToDurations(tc.lat, tc.d, tc.counts); !cmp.Equal(got, tc.want) {
			t.Errorf("countsToDurations(%v, %v, %d) = %v, want %v", tc.lat, tc.d, tc.counts, got, tc.want)
		}
	}
}

// TestCyclesAdvance: the counter the latency tests read moves forward on
// one thread, and the clock built on it turns a run's ticks into samples
// whose sum, doubled, is within the run.
func TestCyclesAdvance(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c := newClock(4)
	for i := 0; i < 4; i++ {
		time.Sleep(time.Millisecond)
		c.tick()
	}
	for i, v := range c.lat {
		if v == 0 {
			t.Errorf("tick %d: the counter did not move over a sleep of 1 ms", i)
		}
	}
	var sum time.Duration
	for _, d := range c.samples() {
		sum += 2 * d
	}
	if span := time.Since(c.t0); sum <= 0 || sum > span {
		t.Errorf("samples sum to %v doubled, the run took %v", sum, span)
	}
}

// TestPeakCounts holds the bandwidth tests' peak to perftest's: the
// fewest counts a message over any run from a post to a signaled
// completion, so that completions taken in a burst cannot make a peak
// faster than the posts (the peak was once measured between polls, and
// a burst read as hundreds of GB/s).
func TestPeakCounts(t *testing.T) {
	for _, tc := range []struct {
		name              string
		posted, completed []uint64
		cqMod             int
		want              uint64
	}{
		{"every second signaled", []uint64{0, 10, 20, 30}, []uint64{0, 50, 0, 70}, 2, 17}, // posts 0..3 to 70: 70/4
		{"the last signaled too", []uint64{0, 5, 10}, []uint64{0, 20, 21}, 2, 7},          // posts 0..2 to 21: 21/3
		{"a burst of completions", []uint64{0, 1, 2, 3}, []uint64{100, 100, 100, 100}, 1, 25},
		{"one message", []uint64{5}, []uint64{9}, 1, 4},
		{"one signaled in more than the run", []uint64{0, 2}, []uint64{0, 8}, 100, 4},
		{"no time at all", []uint64{7, 7}, []uint64{7, 7}, 1, 1},
	} {
		if got := peakCounts(tc.posted, tc.completed, tc.cqMod); got != tc.want {
			t.Errorf("%s: %d counts a message, want %d", tc.name, got, tc.want)
		}
	}
}
