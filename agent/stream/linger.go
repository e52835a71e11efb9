package stream

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// lingerTimeout bounds how long closing an upgraded connection waits for
// the client to close its side.
var lingerTimeout = 5 * time.Second

// lingerUpgrades makes the connections that upgrades (SPDY, WebSocket)
// hijack from w close gracefully, see lingerConn.
func lingerUpgrades(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&lingerWriter{ResponseWriter: w}, r)
	})
}

// lingerWriter is a ResponseWriter whose Hijack returns a lingerConn.
type lingerWriter struct {
	http.ResponseWriter
}

func (w *lingerWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return &lingerConn{Conn: conn}, brw, nil
}

func (w *lingerWriter) Flush() {
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// lingerConn closes by shutting down its sending side first (TLS
// close_notify, TCP FIN), then discarding what the client still sends
// until it closes too or lingerTimeout passes. Closing a socket whose
// receive buffer holds unread data makes the kernel reset the connection
// and drop what was sent but not yet delivered: a command that exits
// without reading all of its stdin would lose its exit status, the last
// thing written, and the client would see a reset instead.
type lingerConn struct {
	net.Conn
	once sync.Once
	err  error
}

func (c *lingerConn) Close() error {
	c.once.Do(func() {
		// A write blocked on a client that stopped reading must not hold
		// the close up for ever.
		_ = c.Conn.SetWriteDeadline(time.Now().Add(lingerTimeout))
		if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			_ = c.Conn.SetReadDeadline(time.Now().Add(lingerTimeout))
			_, _ = io.Copy(io.Discard, c.Conn)
		}
		c.err = c.Conn.Close()
	})
	return c.err
}
