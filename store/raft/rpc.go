package raft

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"skiff/store"
	"skiff/store/sqlite"
)

// skiff's RPCs between members ride the raft port (muxRPC). A call is one
// request frame and one response frame on a connection nobody else uses
// meanwhile; idle connections are pooled per address. A frame is a 4-byte
// big-endian length, a type byte and a JSON body.

type rpcType byte

const (
	rpcForward   rpcType = iota + 1 // a batch of writes for the leader
	rpcReadIndex                    // the leader's read index
	rpcAddVoter
	rpcRemove
)

const maxFrame = 64 << 20 // a forwarded batch of 512 large objects fits

// Error codes carry sentinels across the wire; errors.Is works on the
// decoded error as on the original.
const (
	codeOK = iota
	codeNotLeader
	codeUnavailable
	codeExists
	codeNotFound
	codeConflict
	codeFuture
	codeInvalidKey
	codeClosed
	codeOther
)

var codeSentinels = map[int]error{
	codeNotLeader:   errNotLeader,
	codeUnavailable: store.ErrUnavailable,
	codeExists:      store.ErrExists,
	codeNotFound:    store.ErrNotFound,
	codeConflict:    store.ErrConflict,
	codeFuture:      store.ErrFutureRevision,
	codeInvalidKey:  store.ErrInvalidKey,
	codeClosed:      store.ErrClosed,
}

// errNotLeader: the member asked is not the leader (any more). The request
// was not started, so the caller may send it again to the new leader.
var errNotLeader = errors.New("raft: not the leader")

// errNotSent: the request never left this member (no connection), so it
// may be retried without risking a second application.
var errNotSent = errors.New("raft: request not sent")

func errCode(err error) int {
	if err == nil {
		return codeOK
	}
	for _, c := range []int{codeNotLeader, codeUnavailable, codeExists, codeNotFound, codeConflict, codeFuture, codeInvalidKey, codeClosed} {
		if errors.Is(err, codeSentinels[c]) {
			return c
		}
	}
	return codeOther
}

// remoteError is an error decoded from the wire: its text is the original
// one and it unwraps to the sentinel its code names.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

func decodeErr(code int, msg string) error {
	if code == codeOK {
		return nil
	}
	return &remoteError{msg: msg, sentinel: codeSentinels[code]}
}

type forwardReq struct {
	Commands []sqlite.Command `json:"c"`
	// TimeoutMS bounds the leader's wait for the commit.
	TimeoutMS int64 `json:"t"`
}

type wireResult struct {
	KV   store.KeyValue `json:"kv"`
	Rev  int64          `json:"r,omitempty"`
	Code int            `json:"code,omitempty"`
	Msg  string         `json:"msg,omitempty"`
}

type rpcResp struct {
	Code    int          `json:"code,omitempty"`
	Msg     string       `json:"msg,omitempty"`
	Index   uint64       `json:"i,omitempty"`
	Results []wireResult `json:"res,omitempty"`
}

type memberReq struct {
	ID        string `json:"id"`
	Addr      string `json:"addr,omitempty"`
	TimeoutMS int64  `json:"t"`
}

func encodeResults(rs []sqlite.Result) []wireResult {
	out := make([]wireResult, len(rs))
	for i, r := range rs {
		out[i] = wireResult{KV: r.KV, Rev: r.Rev, Code: errCode(r.Err)}
		if r.Err != nil {
			out[i].Msg = r.Err.Error()
		}
	}
	return out
}

func decodeResults(ws []wireResult) []sqlite.Result {
	out := make([]sqlite.Result, len(ws))
	for i, w := range ws {
		out[i] = sqlite.Result{KV: w.KV, Rev: w.Rev, Err: decodeErr(w.Code, w.Msg)}
	}
	return out
}

func respErr(err error) rpcResp {
	return rpcResp{Code: errCode(err), Msg: err.Error()}
}

func writeFrame(w *bufio.Writer, typ rpcType, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var hdr [5]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(len(b)+1))
	hdr[4] = byte(typ)
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.Flush()
}

func readFrame(r *bufio.Reader) (rpcType, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 1 || n > maxFrame {
		return 0, nil, fmt.Errorf("raft: bad RPC frame length %d", n)
	}
	b := make([]byte, n-1)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, nil, err
	}
	return rpcType(hdr[4]), b, nil
}

// rpcConn is one pooled client connection. While idle in the pool a
// goroutine waits on it for a byte, so that a connection the peer closed
// (it restarted) is known dead before a request is written on it: a
// forwarded write sent on a dead connection would have an unknown outcome.
type rpcConn struct {
	c    net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	idle chan error // the idle watcher's result
}

// rpcClient calls other members. Connections are dialled through the
// stream layer, so they are mutual TLS and closed with it.
type rpcClient struct {
	stream *streamLayer
	mu     sync.Mutex
	idle   map[string][]*rpcConn
	closed bool
}

const maxIdlePerAddr = 8

func newRPCClient(s *streamLayer) *rpcClient {
	return &rpcClient{stream: s, idle: map[string][]*rpcConn{}}
}

// get returns a live idle connection or dials one.
func (c *rpcClient) get(ctx context.Context, addr string) (*rpcConn, error) {
	for {
		c.mu.Lock()
		conns := c.idle[addr]
		var rc *rpcConn
		if n := len(conns); n > 0 {
			rc = conns[n-1]
			c.idle[addr] = conns[:n-1]
		}
		c.mu.Unlock()
		if rc == nil {
			break
		}
		// Wake the watcher: a timeout means nothing came, the
		// connection is as it was.
		rc.c.SetReadDeadline(time.Now())
		err := <-rc.idle
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			rc.c.SetReadDeadline(time.Time{})
			return rc, nil
		}
		rc.c.Close() // closed by the peer, or it sent something unasked
	}
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return nil, fmt.Errorf("%w: %w", errNotSent, context.DeadlineExceeded)
		}
	}
	conn, err := c.stream.dial(addr, muxRPC, timeout)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNotSent, err)
	}
	return &rpcConn{c: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}, nil
}

func (c *rpcClient) put(addr string, rc *rpcConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.idle[addr]) >= maxIdlePerAddr {
		rc.c.Close()
		return
	}
	rc.idle = make(chan error, 1)
	go func() {
		_, err := rc.r.Peek(1)
		rc.idle <- err
	}()
	c.idle[addr] = append(c.idle[addr], rc)
}

// call sends one request and decodes the response into resp. A failure
// before the request was written wraps errNotSent.
func (c *rpcClient) call(ctx context.Context, addr string, typ rpcType, req any, resp *rpcResp) error {
	rc, err := c.get(ctx, addr)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		rc.c.SetDeadline(dl)
	}
	// The connection is ours alone for the call; closing it ends a call
	// whose caller has gone.
	stop := context.AfterFunc(ctx, func() { rc.c.Close() })
	defer stop()
	if err := writeFrame(rc.w, typ, req); err != nil {
		rc.c.Close()
		return fmt.Errorf("raft: RPC to %s: %w", addr, err)
	}
	_, body, err := readFrame(rc.r)
	if err != nil {
		rc.c.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("raft: RPC to %s: %w", addr, err)
	}
	if !stop() {
		rc.c.Close()
	} else {
		rc.c.SetDeadline(time.Time{})
		c.put(addr, rc)
	}
	if err := json.Unmarshal(body, resp); err != nil {
		return fmt.Errorf("raft: RPC to %s: bad response: %w", addr, err)
	}
	return nil
}

// close closes the idle connections and waits for their watchers.
func (c *rpcClient) close() {
	c.mu.Lock()
	c.closed = true
	idle := c.idle
	c.idle = map[string][]*rpcConn{}
	c.mu.Unlock()
	for _, conns := range idle {
		for _, rc := range conns {
			rc.c.Close()
			<-rc.idle
		}
	}
}

// serveRPC answers calls on one accepted connection until it closes.
func (s *Store) serveRPC(conn net.Conn) {
	r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
	for {
		typ, body, err := readFrame(r)
		if err != nil {
			return
		}
		resp := s.handleRPC(typ, body)
		if err := writeFrame(w, typ, resp); err != nil {
			return
		}
	}
}

func (s *Store) handleRPC(typ rpcType, body []byte) rpcResp {
	switch typ {
	case rpcForward:
		var req forwardReq
		if err := json.Unmarshal(body, &req); err != nil {
			return respErr(err)
		}
		ctx, cancel := s.rpcContext(req.TimeoutMS)
		defer cancel()
		results, index, err := s.applyAsLeader(ctx, req.Commands)
		if err != nil {
			return respErr(err)
		}
		return rpcResp{Index: index, Results: encodeResults(results)}
	case rpcReadIndex:
		ctx, cancel := s.rpcContext(0)
		defer cancel()
		index, err := s.readIndex(ctx, true)
		if err != nil {
			return respErr(err)
		}
		return rpcResp{Index: index}
	case rpcAddVoter, rpcRemove:
		var req memberReq
		if err := json.Unmarshal(body, &req); err != nil {
			return respErr(err)
		}
		ctx, cancel := s.rpcContext(req.TimeoutMS)
		defer cancel()
		var err error
		if typ == rpcAddVoter {
			err = s.addVoterAsLeader(ctx, req.ID, req.Addr)
		} else {
			err = s.removeAsLeader(ctx, req.ID)
		}
		if err != nil {
			return respErr(err)
		}
		return rpcResp{}
	}
	return rpcResp{Code: codeOther, Msg: fmt.Sprintf("raft: unknown RPC type %d", typ)}
}

// rpcContext bounds a served call by the caller's timeout (at most
// ApplyTimeout) and ends it when the store closes.
func (s *Store) rpcContext(timeoutMS int64) (context.Context, context.CancelFunc) {
	d := s.cfg.ApplyTimeout
	if t := time.Duration(timeoutMS) * time.Millisecond; t > 0 && t < d {
		d = t
	}
	return context.WithTimeout(s.bg, d)
}
