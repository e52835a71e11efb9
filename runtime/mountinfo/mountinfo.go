// Package mountinfo reads the mount table of the calling process
// (/proc/self/mountinfo): the agent unmounts pod volumes and namespaces
// with it, and the tests and benchmarks clean up after nodes with it.
package mountinfo

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Under lists the mount points at or below root, deepest first, so that
// unmounting in that order never hits a busy parent.
func Under(root string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	root = filepath.Clean(root)
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := Unescape(fields[4])
		if mp == root || strings.HasPrefix(mp, root+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// IsMountPoint reports whether dir itself is a mount point.
func IsMountPoint(dir string) (bool, error) {
	mps, err := Under(dir)
	if err != nil {
		return false, err
	}
	dir = filepath.Clean(dir)
	for _, mp := range mps {
		if mp == dir {
			return true, nil
		}
	}
	return false, nil
}

// Unescape undoes mountinfo's octal escapes (\040 for a space).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
