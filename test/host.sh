#!/bin/sh
# host.sh: what make test needs of the machine it runs on, found out by
# trying rather than assumed, so that a host that lacks it gets a way
# around or a clear message instead of a strange failure.
#
#   sh test/host.sh tmpdir       prints a directory in which go may build and
#                                run its binaries: $GOTMPDIR, $TMPDIR or /tmp
#                                where the host lets a program there run (a
#                                noexec mount does not), else one in the
#                                goverbs cache.
#   sh test/host.sh exec GOARCH  prints what go test's -exec needs to run
#                                linux/GOARCH binaries here: nothing where
#                                the host runs them itself (its own
#                                architecture, 386 on most x86-64 kernels,
#                                or a binfmt_misc emulator), else the path of
#                                QEMU's user-mode emulator: the machine's
#                                own (qemu-user-static, installed with
#                                apt-get when missing) where it runs a Go
#                                program of that architecture, else Debian
#                                trixie's qemu-user, downloaded from the
#                                machine's Debian archive and unpacked into
#                                the goverbs cache (bookworm's QEMU 7.2
#                                crashes starting a Go 386 program's
#                                threads; trixie's QEMU 10 does not).
#                                GOVERBS_EXEC=qemu skips the native try, to
#                                prove the emulated path on a host that has
#                                the native one.
#   sh test/host.sh gcc          installs gcc and libc's headers with apt-get
#                                when gcc is missing (cgo for -race, and
#                                genuapi's C programs).
#
# What it decides goes to standard error, one line, so make's output says
# which path a run took.
set -eu

say() { echo "host: $*" >&2; }

cache() {
	if [ -n "${GOVERBS_CACHE:-}" ]; then
		echo "$GOVERBS_CACHE"
	else
		echo "${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/goverbs"
	fi
}

# runs_in DIR: whether a program written into DIR can be run.
runs_in() {
	[ -d "$1" ] && [ -w "$1" ] || return 1
	f=$(mktemp "$1/goverbs-exec.XXXXXX") || return 1
	printf '#!/bin/sh\nexit 0\n' >"$f"
	chmod +x "$f"
	ok=0
	"$f" 2>/dev/null || ok=1
	rm -f "$f"
	return $ok
}

tmpdir() {
	for d in "${GOTMPDIR:-}" "${TMPDIR:-}" /tmp; do
		[ -n "$d" ] || continue
		if runs_in "$d"; then
			echo "$d"
			return
		fi
		say "programs cannot run from $d (a noexec mount?); trying the next"
	done
	d="$(cache)/tmp"
	mkdir -p "$d"
	if ! runs_in "$d"; then
		say "programs cannot run from $d either: set GOTMPDIR to a directory that allows it"
		exit 1
	fi
	say "go builds and runs its binaries in $d"
	echo "$d"
}

install() {
	say "installing $* with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq "$@" >/dev/null 2>&1 ||
		{ apt-get update -qq && apt-get install -y -qq "$@" >/dev/null; } ||
		{ say "apt-get install $* failed: install it by hand"; exit 1; }
}

# qemu_name GOARCH: QEMU's name for the architecture.
qemu_name() {
	case $1 in
	386) echo i386 ;;
	amd64) echo x86_64 ;;
	arm64) echo aarch64 ;;
	arm) echo arm ;;
	mips | mipsle | mips64 | mips64le | ppc64 | ppc64le | riscv64 | s390x | loong64) echo "$1" ;;
	*)
		say "no QEMU user-mode emulator known for GOARCH=$1"
		exit 1
		;;
	esac
}

exec_for() {
	goarch=$1
	work=$(mktemp -d "$(tmpdir)/goverbs-host.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	printf 'package main\n\nfunc main() {}\n' >"$work/main.go"
	printf 'module probe\n' >"$work/go.mod"
	(cd "$work" && GOOS=linux GOARCH=$goarch CGO_ENABLED=0 GOFLAGS= go build -o probe .) ||
		{ say "cannot build a linux/$goarch program"; exit 1; }
	if [ "${GOVERBS_EXEC:-}" = qemu ]; then
		why="GOVERBS_EXEC=qemu"
	elif why=$("$work/probe" 2>&1); then
		say "this host runs linux/$goarch binaries itself"
		return
	else
		why=${why:-it exited with an error and no message}
		why="it cannot: $(echo "$why" | tail -n 1 | sed 's/^.*probe: *//')"
	fi
	name=$(qemu_name "$goarch")
	command -v "qemu-$name-static" >/dev/null || install qemu-user-static
	path=$(command -v "qemu-$name-static") || { say "qemu-user-static has no qemu-$name-static"; exit 1; }
	if ! "$path" "$work/probe" >/dev/null 2>&1; then
		say "$path cannot run a linux/$goarch Go program; taking a newer QEMU"
		path=$(newer_qemu "$name")
		"$path" "$work/probe" || { say "$path cannot run a linux/$goarch Go program either"; exit 1; }
	fi
	say "linux/$goarch binaries run under $path ($why)"
	echo "$path"
}

# newer_qemu NAME: the path of qemu-NAME from Debian trixie's qemu-user
# (static binaries), downloaded from the Debian archive the machine's apt
# already uses and unpacked into the cache; nothing is installed.
newer_qemu() {
	dir="$(cache)/qemu-user-trixie"
	bin="$dir/usr/bin/qemu-$1"
	if [ ! -x "$bin" ]; then
		site=$(apt-get indextargets --format '$(SITE) $(CODENAME) $(TARGET_OF)' 2>/dev/null |
			awk '$3 == "deb" && $2 !~ /-/ { print $1; exit }')
		[ -n "$site" ] || { say "no Debian archive among apt's sources to fetch qemu-user from"; exit 1; }
		apt="$dir.apt"
		rm -rf "$apt" "$dir"
		mkdir -p "$apt/lists/partial"
		echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $site trixie main" >"$apt/sources.list"
		set -- -o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
			-o "Dir::State::Lists=$apt/lists" -o APT::Sandbox::User=root
		say "downloading Debian trixie's qemu-user (static binaries, about 70 MB) into $dir"
		{ apt-get -qq "$@" update && (cd "$apt" && apt-get -qq "$@" download qemu-user); } >&2 ||
			{ say "cannot download trixie's qemu-user"; exit 1; }
		dpkg-deb -x "$apt"/qemu-user_*.deb "$dir" || { say "cannot unpack trixie's qemu-user"; exit 1; }
		rm -rf "$apt"
	fi
	echo "$bin"
}

case "${1:-}" in
tmpdir) tmpdir ;;
exec)
	[ $# -eq 2 ] || { echo "usage: sh test/host.sh exec GOARCH" >&2; exit 2; }
	exec_for "$2"
	;;
gcc) command -v gcc >/dev/null || install gcc libc6-dev ;;
*)
	echo "usage: sh test/host.sh tmpdir | exec GOARCH | gcc" >&2
	exit 2
	;;
esac
