package loadbalancer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// state is the state file's content.
type state struct {
	// Initial is the --server address when the file was written, for
	// whoever reads the file; the running agent's own --server wins.
	Initial string `json:"initial"`
	// Servers are the learned servers (the last Update).
	Servers []string `json:"servers"`
}

// normalizeAddr checks host:port and writes it one way (IPv6 bracketed),
// so that duplicates compare equal.
func normalizeAddr(s string) (string, bool) {
	host, port, err := net.SplitHostPort(strings.TrimSpace(s))
	if err != nil || host == "" {
		return "", false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", false
	}
	return net.JoinHostPort(strings.ToLower(host), port), true
}

// normalize drops empty and malformed entries and duplicates, keeping the
// first occurrence's place.
func normalize(in []string) (out []string, bad []string) {
	for _, s := range in {
		if strings.TrimSpace(s) == "" {
			continue
		}
		a, ok := normalizeAddr(s)
		if !ok {
			bad = append(bad, s)
			continue
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, bad
}

// withInitial is learned with initial appended when not among them: the
// --server address stays as the last fallback (it may be a DNS name or a
// VIP in front of the very servers the Endpoints list).
func withInitial(learned []string, initial string) []string {
	out := append([]string(nil), learned...)
	if !slices.Contains(out, initial) {
		out = append(out, initial)
	}
	return out
}

// Update replaces the learned servers (host:port each). Empty and
// malformed entries and duplicates are dropped; an update left empty is
// ignored, since forgetting servers is worse than keeping stale ones (they
// are only tried after the healthy ones). The --server address stays. The
// list is written to the state file (atomically) when it changed.
// Connections to servers no longer listed are closed; if the active one
// went, the first healthy listed server becomes active.
func (l *LB) Update(servers []string) {
	learned, bad := normalize(servers)
	if len(bad) > 0 {
		l.log.Warn("ignoring malformed server addresses", "addresses", bad)
	}
	if len(learned) == 0 {
		l.log.Debug("ignoring an empty server list")
		return
	}
	l.persistMu.Lock()
	defer l.persistMu.Unlock()
	l.mu.Lock()
	if slices.Equal(learned, l.learned) {
		l.mu.Unlock()
		return
	}
	old := l.list
	l.learned = learned
	l.list = withInitial(learned, l.cfg.Initial)
	var cut []*proxied
	for _, s := range old {
		if !slices.Contains(l.list, s) {
			delete(l.down, s)
			cut = append(cut, l.connsTo(s)...)
		}
	}
	from := l.active
	if !slices.Contains(l.list, l.active) {
		l.active = l.nextHealthy(l.list[0])
	}
	to, list := l.active, append([]string(nil), l.list...)
	l.mu.Unlock()
	l.log.Info("API servers updated", "servers", list, "active", to)
	if from != to {
		l.log.Info("active API server removed", "from", from, "to", to, "cut", len(cut))
	}
	for _, p := range cut {
		p.close()
	}
	if err := l.saveState(learned); err != nil {
		l.log.Warn("saving the server list", "path", l.statePath, "err", err)
	}
}

// nextHealthy is the first healthy server from start on (in list order,
// wrapping), or start itself when none is; mu held.
func (l *LB) nextHealthy(start string) string {
	for _, s := range l.rotation(start) {
		if _, down := l.down[s]; !down {
			return s
		}
	}
	return start
}

// rotation is the list starting at start (or at its head when start is
// not listed); mu held.
func (l *LB) rotation(start string) []string {
	i := max(slices.Index(l.list, start), 0)
	return append(append([]string(nil), l.list[i:]...), l.list[:i]...)
}

// candidates is the dial order: the active server, the healthy ones after
// it, then the ones marked down.
func (l *LB) candidates() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var up, down []string
	for _, s := range l.rotation(l.active) {
		if _, d := l.down[s]; d {
			down = append(down, s)
		} else {
			up = append(up, s)
		}
	}
	return append(up, down...)
}

// connected records a successful dial to addr: it is up, and it becomes
// active if the active one is down.
func (l *LB) connected(addr string) {
	l.markUp(addr, "dial")
}

// markUp records that addr answers; if the active server is down, addr
// takes its place.
func (l *LB) markUp(addr, why string) {
	l.mu.Lock()
	_, wasDown := l.down[addr]
	delete(l.down, addr)
	from := l.active
	_, activeDown := l.down[l.active]
	if (activeDown || !slices.Contains(l.list, l.active)) && slices.Contains(l.list, addr) {
		l.active = addr
	}
	to := l.active
	l.mu.Unlock()
	if wasDown {
		l.log.Info("API server up", "server", addr, "by", why)
	}
	if from != to {
		l.log.Info("active API server changed", "from", from, "to", to)
	}
}

// markDown records that addr failed. Its proxied connections are closed
// (a dead peer would hold them until TCP gives up); if it was active, the
// next healthy server becomes active.
func (l *LB) markDown(addr string, err error, why string) {
	l.mu.Lock()
	if !slices.Contains(l.list, addr) {
		l.mu.Unlock()
		return
	}
	_, wasDown := l.down[addr]
	l.down[addr] = err
	from := l.active
	if addr == l.active {
		l.active = l.nextHealthy(addr)
	}
	to := l.active
	var cut []*proxied
	if !wasDown {
		cut = l.connsTo(addr)
	}
	l.mu.Unlock()
	if !wasDown {
		l.log.Warn("API server down", "server", addr, "by", why, "err", err, "cut", len(cut))
	}
	if from != to {
		l.log.Info("active API server changed", "from", from, "to", to)
	}
	for _, p := range cut {
		p.close()
	}
}

// loadState reads the learned servers; a missing file is an empty list,
// an unreadable or corrupt one is logged and ignored (the agent then knows
// only --server until the Endpoints are read again).
func (l *LB) loadState() []string {
	data, err := os.ReadFile(l.statePath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		l.log.Warn("ignoring the server list state file", "path", l.statePath, "err", err)
		return nil
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		l.log.Warn("ignoring a corrupt server list state file", "path", l.statePath, "err", err)
		return nil
	}
	servers, bad := normalize(st.Servers)
	if len(bad) > 0 {
		l.log.Warn("ignoring malformed addresses in the server list state file", "path", l.statePath, "addresses", bad)
	}
	return servers
}

// saveState writes the learned servers through a temp file and a rename,
// so a crash leaves the old list or the new one.
func (l *LB) saveState(learned []string) error {
	if l.statePath == "" {
		return nil
	}
	data, err := json.MarshalIndent(state{Initial: l.cfg.Initial, Servers: learned}, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(l.statePath)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(l.statePath)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, l.statePath)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", l.statePath, err)
	}
	return nil
}
