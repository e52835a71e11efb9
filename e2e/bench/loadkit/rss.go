package loadkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// RSSSample is a process's resident set, its peak and its CPU time.
type RSSSample struct {
	Label  string  `json:"label"`
	RSSMiB float64 `json:"rss_mib"`
	HWMMiB float64 `json:"peak_rss_mib"`
	CPU    string  `json:"cpu_time"`
}

// SampleRSS reads pid's resident set with ps, as e2e/bench/lib.sh does,
// and its peak (VmHWM) from /proc. pid 0 means not measured: an error.
func SampleRSS(pid int, label string) (RSSSample, error) {
	s := RSSSample{Label: label}
	if pid == 0 {
		return s, errors.New("no server pid given")
	}
	out, err := exec.Command("ps", "-o", "rss=,cputime=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		return s, fmt.Errorf("ps -p %d: %w", pid, err)
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		return s, fmt.Errorf("ps -p %d: unexpected output %q", pid, out)
	}
	kb, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, fmt.Errorf("ps -p %d: rss %q: %w", pid, f[0], err)
	}
	s.RSSMiB, s.CPU = kb/1024, f[1]
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64); err == nil {
					s.HWMMiB = kb / 1024
				}
			}
		}
	}
	return s, nil
}

// LoadAvg is the first three fields of /proc/loadavg ("" if unreadable),
// to print the machine's load beside a figure.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
