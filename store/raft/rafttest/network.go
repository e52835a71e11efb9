package rafttest

import (
	"io"
	"net"
	"sync"
	"time"
)

// network puts a TCP proxy on every ordered pair of members: member j
// reaches member k only through proxy (j, k), which its Config.AddressOf
// names. Cutting the proxies of a member isolates it in both directions,
// at the TCP level, with nothing in the store knowing.
type network struct {
	n       int
	proxies [][]*proxy // [from][to]; nil on the diagonal
}

func newNetwork(n int) (*network, error) {
	nw := &network{n: n, proxies: make([][]*proxy, n)}
	for j := range n {
		nw.proxies[j] = make([]*proxy, n)
		for k := range n {
			if j == k {
				continue
			}
			p, err := newProxy()
			if err != nil {
				nw.close()
				return nil, err
			}
			nw.proxies[j][k] = p
		}
	}
	return nw, nil
}

// addr is where member from dials member to.
func (nw *network) addr(from, to int) string {
	if from == to {
		return ""
	}
	return nw.proxies[from][to].ln.Addr().String()
}

// setTarget points every proxy towards member k at its current address.
func (nw *network) setTarget(k int, addr string) {
	for j := range nw.n {
		if p := nw.proxies[j][k]; p != nil {
			p.setTarget(addr)
		}
	}
}

func (nw *network) setBlocked(i int, blocked bool) {
	for j := range nw.n {
		for _, p := range []*proxy{nw.proxies[i][j], nw.proxies[j][i]} {
			if p != nil {
				p.setBlocked(blocked)
			}
		}
	}
}

func (nw *network) close() {
	for _, row := range nw.proxies {
		for _, p := range row {
			if p != nil {
				p.close()
			}
		}
	}
}

type proxy struct {
	ln      net.Listener
	mu      sync.Mutex
	target  string
	blocked bool
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
}

func newProxy() (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

func (p *proxy) setTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

// setBlocked cuts every connection through the proxy and refuses new ones
// (true), or lets them through again.
func (p *proxy) setBlocked(b bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = b
	if b {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target, refuse := p.target, p.blocked || p.closed || p.target == ""
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.pipe(c, target)
		}()
	}
}

func (p *proxy) pipe(c net.Conn, target string) {
	up, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		c.Close()
		up.Close()
		return
	}
	defer p.untrack(c, up)
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		// Either side ending ends both: a half-open pipe would leave
		// the peer waiting.
		dst.Close()
		src.Close()
	}
	go cp(up, c)
	go cp(c, up)
	wg.Wait()
}

func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked || p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
	}
}

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
