package raft

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	hraft "github.com/hashicorp/raft"
)

// One TCP port carries two protocols. After the TLS handshake the dialler
// sends one byte: muxRaft hands the connection to raft's NetworkTransport,
// muxRPC to skiff's own RPCs (forwarded writes, membership changes, read
// index requests). One port means one firewall rule and one certificate.
const (
	muxRaft byte = 'R'
	muxRPC  byte = 'S'
)

const handshakeTimeout = 10 * time.Second

// streamLayer is raft's StreamLayer over mutual TLS, and the RPC server.
// It tracks every connection it accepts or dials so that Close leaves no
// goroutine blocked on a socket behind.
type streamLayer struct {
	ln        net.Listener
	advertise net.Addr
	serverTLS *tls.Config
	clientTLS *tls.Config
	serveRPC  func(net.Conn)

	raftConns chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	// raftWG counts the accepted connections handed to raft until raft's
	// handler closes them. The handlers are not raft's own goroutines:
	// one may still be answering a heartbeat (which writes raft's stable
	// store) after Shutdown returned, so Close waits for them.
	raftWG sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

var _ hraft.StreamLayer = (*streamLayer)(nil)

// newStreamLayer listens on bind. advertise "" advertises the listener's
// own address (useful with port 0).
func newStreamLayer(bind, advertise string, serverTLS, clientTLS *tls.Config, serveRPC func(net.Conn)) (*streamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft: listen on %s: %w", bind, err)
	}
	var adv net.Addr = ln.Addr()
	if advertise != "" {
		a, err := net.ResolveTCPAddr("tcp", advertise)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("raft: advertise address %q: %w", advertise, err)
		}
		if a.IP == nil || a.IP.IsUnspecified() {
			ln.Close()
			return nil, fmt.Errorf("raft: advertise address %q is not a routable address", advertise)
		}
		adv = a
	}
	s := &streamLayer{
		ln:        ln,
		advertise: adv,
		serverTLS: serverTLS,
		clientTLS: clientTLS,
		serveRPC:  serveRPC,
		raftConns: make(chan net.Conn),
		closed:    make(chan struct{}),
		conns:     map[net.Conn]struct{}{},
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

func (s *streamLayer) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// The listener is broken (closed under us): nothing to accept.
			return
		}
		if !s.track(c) {
			c.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.route(c)
		}()
	}
}

// route completes the handshake, reads the protocol byte and hands the
// connection on.
func (s *streamLayer) route(raw net.Conn) {
	tc := tls.Server(raw, s.serverTLS)
	raw.SetDeadline(time.Now().Add(handshakeTimeout))
	var b [1]byte
	if err := tc.Handshake(); err != nil {
		s.drop(raw)
		return
	}
	if _, err := tc.Read(b[:]); err != nil {
		s.drop(raw)
		return
	}
	raw.SetDeadline(time.Time{})
	conn := &trackedConn{Conn: tc, s: s, raw: raw}
	switch b[0] {
	case muxRaft:
		s.mu.Lock()
		if s.conns == nil {
			s.mu.Unlock()
			conn.Close()
			return
		}
		s.raftWG.Add(1)
		conn.onClose = s.raftWG.Done
		s.mu.Unlock()
		select {
		case s.raftConns <- conn:
		case <-s.closed:
			conn.Close()
		}
	case muxRPC:
		s.serveRPC(conn)
		conn.Close()
	default:
		conn.Close()
	}
}

// Accept implements net.Listener for raft: the connections that asked for
// the raft protocol.
func (s *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.raftConns:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

// Addr is the advertised address: raft records it in the configuration.
func (s *streamLayer) Addr() net.Addr { return s.advertise }

// Close stops accepting and closes every connection, then waits for the
// routing goroutines. Raft's transport calls it on shutdown; the Store
// calls it again (it is idempotent).
func (s *streamLayer) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.conns = nil
		s.mu.Unlock()
	})
	s.wg.Wait()
	s.raftWG.Wait()
	return nil
}

// Dial implements raft's StreamLayer: a TLS connection speaking raft.
func (s *streamLayer) Dial(address hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return s.dial(string(address), muxRaft, timeout)
}

func (s *streamLayer) dial(address string, proto byte, timeout time.Duration) (net.Conn, error) {
	select {
	case <-s.closed:
		return nil, net.ErrClosed
	default:
	}
	d := net.Dialer{Timeout: timeout}
	raw, err := d.Dial("tcp", address)
	if err != nil {
		return nil, err
	}
	if !s.track(raw) {
		raw.Close()
		return nil, net.ErrClosed
	}
	cfg := s.clientTLS
	if cfg.ServerName == "" {
		// Member certificates name the member's address.
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			s.drop(raw)
			return nil, err
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(raw, cfg)
	if timeout <= 0 || timeout > handshakeTimeout {
		timeout = handshakeTimeout
	}
	raw.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		s.drop(raw)
		return nil, fmt.Errorf("raft: TLS handshake with %s: %w", address, err)
	}
	if _, err := tc.Write([]byte{proto}); err != nil {
		s.drop(raw)
		return nil, err
	}
	raw.SetDeadline(time.Time{})
	return &trackedConn{Conn: tc, s: s, raw: raw}, nil
}

func (s *streamLayer) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *streamLayer) drop(raw net.Conn) {
	s.mu.Lock()
	if s.conns != nil {
		delete(s.conns, raw)
	}
	s.mu.Unlock()
	raw.Close()
}

// trackedConn forgets itself in the stream layer when closed.
type trackedConn struct {
	net.Conn
	s       *streamLayer
	raw     net.Conn
	once    sync.Once
	onClose func()
}

func (c *trackedConn) Close() error {
	var err error
	c.once.Do(func() {
		// The raw connection first: tls.Conn.Close may block sending
		// close_notify to a peer that does not read.
		c.s.drop(c.raw)
		err = c.Conn.Close()
		if c.onClose != nil {
			c.onClose()
		}
	})
	return err
}

// addressProvider lets Config.AddressOf override the addresses in the raft
// configuration.
type addressProvider func(id string) string

func (f addressProvider) ServerAddr(id hraft.ServerID) (hraft.ServerAddress, error) {
	if a := f(string(id)); a != "" {
		return hraft.ServerAddress(a), nil
	}
	return "", fmt.Errorf("no address known for %s", id)
}
