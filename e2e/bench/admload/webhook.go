package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

// The label the mutating webhook adds, and its JSON pointer under
// /metadata/labels ("/" escaped as "~1").
const (
	mutatedLabel   = "bench.skiff.dev/mutated"
	mutatedPointer = "bench.skiff.dev~1mutated"
	mutatedValue   = "yes"
)

// Paths the hook server answers.
const (
	validatePath = "/validate"
	mutatePath   = "/mutate"
)

// hookServer is the benchmark's admission webhook: HTTPS on 127.0.0.1
// with a certificate of its own CA, allowing everything on /validate and
// adding mutatedLabel on /mutate. It counts the calls by path and
// namespace, so the benchmark can tell that a webhook was called once per
// create it timed, and not at all when it should not be.
type hookServer struct {
	URL   string // https://127.0.0.1:PORT
	CA    []byte // PEM, for the configurations' caBundle
	srv   *http.Server
	done  chan error
	mu    sync.Mutex
	calls map[callKey]int64
}

type callKey struct{ path, namespace string }

// startHookServer listens on a free port of 127.0.0.1 and serves until
// Close.
func startHookServer() (*hookServer, error) {
	caPEM, cert, err := selfSignedTLS(time.Now())
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook listen: %w", err)
	}
	h := &hookServer{URL: "https://" + ln.Addr().String(), CA: caPEM, done: make(chan error, 1), calls: map[callKey]int64{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+validatePath, h.review(validatePath, false))
	mux.HandleFunc("POST "+mutatePath, h.review(mutatePath, true))
	h.srv = &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { h.done <- h.srv.ServeTLS(ln, "", "") }()
	return h, nil
}

// Close stops the server and waits for its goroutine.
func (h *hookServer) Close(ctx context.Context) error {
	err := h.srv.Shutdown(ctx)
	if serr := <-h.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// Calls is how many reviews path has answered for namespace.
func (h *hookServer) Calls(path, namespace string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[callKey{path, namespace}]
}

func (h *hookServer) review(path string, mutate bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var rev admissionv1.AdmissionReview
		if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&rev); err != nil || rev.Request == nil {
			http.Error(w, fmt.Sprintf("not an AdmissionReview: %v", err), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.calls[callKey{path, rev.Request.Namespace}]++
		h.mu.Unlock()
		resp, err := answer(rev.Request, mutate)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rev.Request, rev.Response = nil, resp
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&rev)
	}
}

// answer allows req; when mutate, with a JSONPatch adding mutatedLabel.
func answer(req *admissionv1.AdmissionRequest, mutate bool) (*admissionv1.AdmissionResponse, error) {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if !mutate {
		return resp, nil
	}
	var obj struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return nil, fmt.Errorf("request object: %w", err)
	}
	// "add" of a member needs its parent: a whole labels map when there is none.
	op := map[string]any{"op": "add", "path": "/metadata/labels", "value": map[string]string{mutatedLabel: mutatedValue}}
	if obj.Metadata.Labels != nil {
		op = map[string]any{"op": "add", "path": "/metadata/labels/" + mutatedPointer, "value": mutatedValue}
	}
	patch, err := json.Marshal([]any{op})
	if err != nil {
		return nil, err
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = patch, &pt
	return resp, nil
}

// selfSignedTLS makes a CA and a serving certificate for 127.0.0.1 signed
// by it, valid for a day from now; it returns the CA as PEM.
func selfSignedTLS(now time.Time) ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "admload webhook CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("serving certificate: %w", err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
