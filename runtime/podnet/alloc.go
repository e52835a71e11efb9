package podnet

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// ErrPodCIDRFull means every usable address of the pod CIDR is allocated.
var ErrPodCIDRFull = errors.New("podnet: no free address in the pod CIDR")

// ErrInvalidUID means a pod UID cannot name a file (empty, a path, too long).
var ErrInvalidUID = errors.New("podnet: invalid pod UID")

// record is one persisted allocation: StateDir/pods/<uid>.json.
type record struct {
	UID       string `json:"uid"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	IP        string `json:"ip,omitempty"`
	NetNSPath string `json:"netns"`
}

// allocator hands out pod addresses and persists every allocation in its own
// small file, written (temp file + rename) before the address is used, so a
// crash never gives one address to two pods.
type allocator struct {
	dir string

	mu     sync.Mutex
	byUID  map[string]record
	byIP   map[string]string // address → UID
	cursor uint32            // last address handed out (round robin)
}

func validUID(uid string) error {
	if uid == "" || uid == "." || uid == ".." || len(uid) > 200 ||
		strings.ContainsAny(uid, "/\x00") || strings.HasSuffix(uid, ".tmp") {
		return fmt.Errorf("%w: %q", ErrInvalidUID, uid)
	}
	return nil
}

// loadAllocator reads every allocation file under dir (creating dir).
func loadAllocator(dir string) (*allocator, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("podnet: state dir: %w", err)
	}
	a := &allocator{dir: dir, byUID: map[string]record{}, byIP: map[string]string{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("podnet: read state dir: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			_ = os.Remove(filepath.Join(dir, name)) // interrupted write
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("podnet: read allocation: %w", err)
		}
		var r record
		if err := json.Unmarshal(data, &r); err != nil || r.UID+".json" != name {
			return nil, fmt.Errorf("podnet: corrupt allocation file %s: %v", name, err)
		}
		a.byUID[r.UID] = r
		if r.IP != "" {
			a.byIP[r.IP] = r.UID
		}
	}
	return a, nil
}

func (a *allocator) get(uid string) (record, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.byUID[uid]
	return r, ok
}

func (a *allocator) list() []record {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]record, 0, len(a.byUID))
	for _, r := range a.byUID {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

// isFree reports whether ip is not allocated to any pod.
func (a *allocator) isFree(ip net.IP) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, used := a.byIP[ip.String()]
	return !used
}

// assign returns the persisted record of r.UID, allocating an address from
// cidr (nil: no address) when it has none inside cidr. The record is on
// disk when assign returns.
func (a *allocator) assign(r record, cidr *net.IPNet) (record, error) {
	a.mu.Lock()
	old, ok := a.byUID[r.UID]
	if ok && (cidr == nil || (old.IP != "" && cidr.Contains(net.ParseIP(old.IP)))) {
		a.mu.Unlock()
		return old, nil
	}
	if cidr != nil {
		ip, err := a.nextFreeLocked(cidr)
		if err != nil {
			a.mu.Unlock()
			return record{}, err
		}
		r.IP = ip.String()
		a.byIP[r.IP] = r.UID
	}
	if ok && old.IP != "" {
		delete(a.byIP, old.IP)
	}
	a.byUID[r.UID] = r
	a.mu.Unlock()

	if err := a.write(r); err != nil {
		a.mu.Lock()
		if r.IP != "" {
			delete(a.byIP, r.IP)
		}
		if ok {
			a.byUID[r.UID] = old
			if old.IP != "" {
				a.byIP[old.IP] = old.UID
			}
		} else {
			delete(a.byUID, r.UID)
		}
		a.mu.Unlock()
		return record{}, err
	}
	return r, nil
}

// release forgets uid's allocation (file first, then memory).
func (a *allocator) release(uid string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.byUID[uid]
	if !ok {
		return nil
	}
	if err := os.Remove(a.path(uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("podnet: release %s: %w", uid, err)
	}
	delete(a.byUID, uid)
	if r.IP != "" && a.byIP[r.IP] == uid {
		delete(a.byIP, r.IP)
	}
	return nil
}

func (a *allocator) path(uid string) string { return filepath.Join(a.dir, uid+".json") }

func (a *allocator) write(r record) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("podnet: encode allocation: %w", err)
	}
	tmp := a.path(r.UID) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("podnet: persist allocation: %w", err)
	}
	if err := os.Rename(tmp, a.path(r.UID)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("podnet: persist allocation: %w", err)
	}
	return nil
}

// nextFreeLocked returns the first free usable address after the cursor
// (wrapping), skipping the network, gateway (first) and broadcast addresses.
// Round robin delays the reuse of a just-freed address.
func (a *allocator) nextFreeLocked(cidr *net.IPNet) (net.IP, error) {
	base := binary.BigEndian.Uint32(cidr.IP.To4())
	ones, bits := cidr.Mask.Size()
	size := uint32(1) << uint(bits-ones)
	if size < 4 {
		return nil, fmt.Errorf("%w: %s is too small", ErrPodCIDRFull, cidr)
	}
	first, last := base+2, base+size-2 // skip network, gateway, broadcast
	start := a.cursor + 1
	if start < first || start > last {
		start = first
	}
	n := last - first + 1
	for i := uint32(0); i < n; i++ {
		v := start + i
		if v > last {
			v -= n
		}
		ip := make(net.IP, 4)
		binary.BigEndian.PutUint32(ip, v)
		if _, used := a.byIP[ip.String()]; !used {
			a.cursor = v
			return ip, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrPodCIDRFull, cidr)
}
