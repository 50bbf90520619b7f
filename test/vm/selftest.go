package main

import (
	"context"
	"fmt"
	"io"

	"path/filepath"
	"strings"
	"time"

	"github.com/goverbs/goverbs/test/vm/internal/plan"
)

// selftest boots three broken guests and checks that each fails with the
// message that names what went wrong: the harness must never pass, hang,
// or fail vaguely when a guest goes bad.
func selftest(ctx context.Context, g *guest, k *kernel, dir string) error {
	cases := []struct {
		name  string
		setup func(g *guest)
		limit time.Duration
		want  string
	}{
		{"no /init in the initramfs", func(g *guest) { g.noInit = true }, 2 * time.Minute, "kernel panic before /init ran"},
		{"/init dies", func(g *guest) { g.plan.Break = "exit" }, 2 * time.Minute, "kernel panic: "},
		{"a step hangs", func(g *guest) {
			g.plan.Steps = []plan.Step{{Name: "hang", Argv: []string{"/init", "hang"}}}
		}, 15 * time.Second, "ran past its 15s time limit"},
	}
	var failed []string
	for i, c := range cases {
		bad := *g
		bad.plan.Steps = nil
		c.setup(&bad)
		initrd := filepath.Join(dir, fmt.Sprintf("selftest-%d.cpio", i))
		if err := bad.writeInitramfs(initrd, k, true); err != nil {
			return err
		}
		start := time.Now()
		bootVM := bootRetrying
		if bad.noInit {
			bootVM = boot // the panic before /init is what this case must see
		}
		res, err := bootVM(ctx, g.arch, qemuCPU("selftest"), k.Image, initrd, c.limit, io.Discard, "")
		if res != nil && res.EarlyPanic != "" {
			fmt.Printf("selftest: %s: booted twice: the first boot's %s\n", c.name, res.EarlyPanic)
		}
		if err == nil && res.Exit != 0 {
			err = fmt.Errorf("guest exit status %d", res.Exit)
		}
		took := time.Since(start).Round(100 * time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case err == nil:
			failed = append(failed, c.name)
			fmt.Printf("selftest: FAIL %s: the harness reported success (%v)\n", c.name, took)
		case !strings.Contains(err.Error(), c.want):
			failed = append(failed, c.name)
			fmt.Printf("selftest: FAIL %s: error %q does not say %q (%v)\n", c.name, err, c.want, took)
			if res != nil {
				for _, l := range res.Console[max(0, len(res.Console)-60):] {
					fmt.Printf("selftest:   | %s\n", l)
				}
			}
		default:
			fmt.Printf("selftest: ok   %s: %v (%v)\n", c.name, err, took)
		}
	}
	fmt.Printf("selftest: %d passed, %d failed\n", len(cases)-len(failed), len(failed))
	if len(failed) > 0 {
		return fmt.Errorf("harness self-test failed: %s", strings.Join(failed, "; "))
	}
	return nil
}
