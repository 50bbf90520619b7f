package rdmacm

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/goverbs/goverbs/internal/errs"
)

// resolveHost parses "host:port" into an address and port: host is an IP
// address, a name the resolver knows (its first address), or empty
// (passive: the IPv4 wildcard).
func resolveHost(ctx context.Context, address string, passive bool) (netip.AddrPort, error) {
	host, ports, err := net.SplitHostPort(address)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: %w", err, errInvalid) // a *net.AddrError, as net.Dial's
	}
	port, err := strconv.ParseUint(ports, 10, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %s: %w", errs.Quote(ports), errInvalid)
	}
	if host == "" {
		if !passive {
			return netip.AddrPort{}, fmt.Errorf("address %s names no host: %w", errs.Quote(address), errInvalid)
		}
		return netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port)), nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		ips, lerr := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if lerr != nil {
			return netip.AddrPort{}, lerr
		}
		if len(ips) == 0 {
			return netip.AddrPort{}, fmt.Errorf("%s has no address: %w", host, errInvalid)
		}
		ip = ips[0]
	}
	return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
}

// kernelTimeout is the timeout the kernel gets for a resolution step:
// resolveTimeout, or what is left of ctx's deadline if that is sooner.
func kernelTimeout(ctx context.Context) time.Duration {
	t := resolveTimeout
	if d, ok := ctx.Deadline(); ok {
		t = min(t, max(time.Until(d), time.Millisecond))
	}
	return t
}

// onLinkOf gives a, a link-local IPv6 address the kernel named without a
// zone, the zone of like, the address it came to.
func onLinkOf(a, like netip.AddrPort) netip.AddrPort {
	ip := a.Addr()
	if !ip.IsLinkLocalUnicast() || !ip.Is6() || ip.Zone() != "" || like.Addr().Zone() == "" {
		return a
	}
	return netip.AddrPortFrom(ip.WithZone(like.Addr().Zone()), a.Port())
}
