package stream

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// lingerPair is a loopback TCP connection: the server end wrapped in a
// lingerConn, and the client end.
func lingerPair(t *testing.T) (*lingerConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server := <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close() })
	return &lingerConn{Conn: server}, client
}

func TestLingerConn_CloseWithUnreadInputStillDeliversTheLastWriteAndEndsCleanly(t *testing.T) {
	server, client := lingerPair(t)
	// The client sends more than the server ever reads, as kubectl does
	// with the stdin of a command that exits without reading it.
	go func() {
		client.SetWriteDeadline(time.Now().Add(10 * time.Second))
		client.Write(bytes.Repeat([]byte("x"), 8<<20))
	}()
	time.Sleep(50 * time.Millisecond) // let the input pile up unread
	if _, err := server.Write([]byte("status")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- server.Close() }()

	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(client)
	if err != nil || string(got) != "status" {
		t.Fatalf("client read %q, %v; want the status then a clean end (no reset)", got, err)
	}
	client.Close()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return after the client closed")
	}
}

func TestLingerConn_CloseGivesUpOnAClientThatNeverCloses(t *testing.T) {
	defer func(d time.Duration) { lingerTimeout = d }(lingerTimeout)
	lingerTimeout = 200 * time.Millisecond
	server, client := lingerPair(t)
	closed := make(chan error, 1)
	go func() { closed <- server.Close() }()
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(client); err != nil {
		t.Fatalf("client: %v, want EOF", err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waiting for a client that keeps its side open")
	}
	if err := server.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
