package main

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// cpioWriter writes a "newc" cpio archive, the format the kernel unpacks
// as an initramfs. Parent directories are added before their children,
// since the kernel's unpacker does not create them.
type cpioWriter struct {
	w    *bufio.Writer
	ino  uint32
	seen map[string]bool
	err  error
}

func newCPIO(w io.Writer) *cpioWriter {
	return &cpioWriter{w: bufio.NewWriterSize(w, 1<<20), ino: 1, seen: map[string]bool{}}
}

const (
	sIFDIR = 0o040000
	sIFREG = 0o100000
	sIFLNK = 0o120000
	sIFCHR = 0o020000
)

// header writes one entry. name is absolute in the guest ("/init").
func (c *cpioWriter) entry(name string, mode uint32, rdevMajor, rdevMinor uint32, data []byte) {
	if c.err != nil {
		return
	}
	name = strings.TrimPrefix(path.Clean(name), "/")
	c.ino++
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write([]byte(name))
	c.write([]byte{0})
	c.pad(len(hdr) + len(name) + 1)
	c.write(data)
	c.pad(len(data))
}

func (c *cpioWriter) write(b []byte) {
	if c.err == nil {
		_, c.err = c.w.Write(b)
	}
}

func (c *cpioWriter) pad(n int) {
	if r := n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// parents adds the directories above name that are not there yet.
func (c *cpioWriter) parents(name string) {
	dir := path.Dir(path.Clean("/" + name))
	if dir == "/" || c.seen[dir] {
		return
	}
	c.parents(dir)
	c.seen[dir] = true
	c.entry(dir, sIFDIR|0o755, 0, 0, nil)
}

// Dir adds a directory.
func (c *cpioWriter) Dir(name string, perm uint32) {
	name = path.Clean("/" + name)
	if c.seen[name] {
		return
	}
	c.parents(name)
	c.seen[name] = true
	c.entry(name, sIFDIR|perm, 0, 0, nil)
}

// File adds a regular file.
func (c *cpioWriter) File(name string, perm uint32, data []byte) {
	c.parents(name)
	c.entry(name, sIFREG|perm, 0, 0, data)
}

// HostFile adds the host file src as name.
func (c *cpioWriter) HostFile(name, src string, perm uint32) {
	data, err := os.ReadFile(src)
	if err != nil {
		if c.err == nil {
			c.err = err
		}
		return
	}
	c.File(name, perm, data)
}

// Symlink adds a symbolic link.
func (c *cpioWriter) Symlink(name, target string) {
	c.parents(name)
	c.entry(name, sIFLNK|0o777, 0, 0, []byte(target))
}

// CharDev adds a character device node.
func (c *cpioWriter) CharDev(name string, perm, major, minor uint32) {
	c.parents(name)
	c.entry(name, sIFCHR|perm, major, minor, nil)
}

// Tree adds everything under the host directory root below the guest
// directory prefix, except what skip rejects (a slash-separated path
// relative to root).
func (c *cpioWriter) Tree(root, prefix string, skip func(rel string) bool) {
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if skip != nil && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		name := path.Join("/", prefix, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			c.Symlink(name, t)
		case info.IsDir():
			c.Dir(name, uint32(info.Mode().Perm()))
		case info.Mode().IsRegular():
			c.HostFile(name, p, uint32(info.Mode().Perm()))
		}
		return c.err
	})
	if err != nil && c.err == nil {
		c.err = err
	}
}

// Close writes the trailer and flushes.
func (c *cpioWriter) Close() error {
	c.entry("TRAILER!!!", 0, 0, 0, nil)
	if c.err != nil {
		return c.err
	}
	return c.w.Flush()
}
