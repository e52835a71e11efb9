package images

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"skiff/runtime/testimage"
)

// testRegistry is a minimal in-process OCI distribution registry serving
// busybox variants, optionally behind basic auth.
type testRegistry struct {
	*httptest.Server
	user, pass string

	mu        sync.Mutex
	manifests map[string][]byte // "<repo>:<tag>" → manifest
	blobs     map[digest.Digest][]byte
	requests  int
}

func newTestRegistry(t *testing.T, user, pass string) *testRegistry {
	t.Helper()
	r := &testRegistry{user: user, pass: pass, manifests: map[string][]byte{}, blobs: map[digest.Digest][]byte{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

// host is the registry's host:port.
func (r *testRegistry) host() string { return strings.TrimPrefix(r.URL, "http://") }

// add serves a busybox variant (its config differs by variant, so its ID
// does) as repo:tag and returns its image ID.
func (r *testRegistry) add(t *testing.T, repo, tag, variant string) string {
	t.Helper()
	base, err := testimage.Build()
	if err != nil {
		t.Fatal(err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(base.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Config.Labels = map[string]string{"variant": variant}
	cfgJSON, _ := json.Marshal(cfg)
	layerDigest := digest.FromBytes(base.LayerGz)
	m := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(cfgJSON), Size: int64(len(cfgJSON))},
		Layers:    []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: layerDigest, Size: int64(len(base.LayerGz))}},
	}
	mJSON, _ := json.Marshal(m)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blobs[digest.FromBytes(cfgJSON)] = cfgJSON
	r.blobs[layerDigest] = base.LayerGz
	r.blobs[digest.FromBytes(mJSON)] = mJSON
	r.manifests[repo+":"+tag] = mJSON
	return digest.FromBytes(cfgJSON).String()
}

func (r *testRegistry) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests++
	r.mu.Unlock()
	if r.user != "" {
		if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.pass {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	}
	path := strings.TrimPrefix(req.URL.Path, "/v2/")
	if path == "" {
		w.WriteHeader(http.StatusOK)
		return
	}
	var body []byte
	var mediaType string
	if repo, ref, ok := strings.Cut(path, "/manifests/"); ok {
		body = r.manifest(repo, ref)
		mediaType = ocispec.MediaTypeImageManifest
	} else if _, ref, ok := strings.Cut(path, "/blobs/"); ok {
		r.mu.Lock()
		body = r.blobs[digest.Digest(ref)]
		r.mu.Unlock()
		mediaType = "application/octet-stream"
	}
	if body == nil {
		http.Error(w, `{"errors":[{"code":"NOT_FOUND"}]}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Docker-Content-Digest", digest.FromBytes(body).String())
	if req.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func (r *testRegistry) manifest(repo, ref string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.HasPrefix(ref, "sha256:") {
		for _, m := range r.manifests {
			if digest.FromBytes(m).String() == ref {
				return m
			}
		}
		return nil
	}
	return r.manifests[repo+":"+ref]
}
