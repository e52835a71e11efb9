package raft_test

import (
	"crypto/tls"
	"encoding/binary"
	"testing"
	"time"

	"skiff/store/raft/rafttest"
)

// readIndexFrame is a raw skiff RPC (mux byte, then a read index request):
// what an intruder would send on the raft port.
func readIndexFrame() []byte {
	body := []byte("{}")
	b := []byte{'S', 0, 0, 0, 0, 2}
	binary.BigEndian.PutUint32(b[1:5], uint32(len(body)+1))
	return append(b, body...)
}

// call sends the frame over TLS with cfg and reports whether an answer came.
func call(addr string, cfg *tls.Config) error {
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(readIndexFrame()); err != nil {
		return err
	}
	var hdr [5]byte
	_, err = conn.Read(hdr[:])
	return err
}

func TestTransport_MutualTLS_PeersWithoutAClusterCertificateAreRefused(t *testing.T) {
	c := rafttest.NewCluster(t, 1)
	addr := c.Members[0].Addr()
	own, err := c.Config(0)
	if err != nil {
		t.Fatal(err)
	}
	// Control: a member's own client configuration gets an answer, so the
	// refusals below are the certificates' doing.
	if err := call(addr, own.ClientTLS.Clone()); err != nil {
		t.Fatalf("a cluster member's certificate was refused: %v", err)
	}
	foreign, err := rafttest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	_, intruder, err := foreign.Member("intruder")
	if err != nil {
		t.Fatal(err)
	}
	foreignCert := intruder.Clone()
	foreignCert.RootCAs = own.ClientTLS.RootCAs // trusts the server, presents a foreign certificate
	noCert := own.ClientTLS.Clone()
	noCert.Certificates = nil
	wrongServer := intruder.Clone() // trusts only the foreign CA: the member's server certificate fails
	wrongServer.Certificates = own.ClientTLS.Certificates
	for name, cfg := range map[string]*tls.Config{
		"client certificate from another CA":               foreignCert,
		"no client certificate":                            noCert,
		"dialler trusting another CA (refuses the member)": wrongServer,
	} {
		if err := call(addr, cfg); err == nil {
			t.Errorf("%s: the call was answered", name)
		} else {
			t.Logf("%s: refused: %v", name, err)
		}
	}
}
