package images

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containerd/containerd/v2/client"
	"github.com/distribution/reference"
	"github.com/klauspost/compress/zstd"
)

// tarballSuffixes are the file names ImportDir imports.
var tarballSuffixes = []string{".tar", ".tar.gz", ".tgz", ".tar.zst", ".tzst"}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// decompress returns r uncompressed: gzip and zstd are detected by their
// magic numbers, anything else is passed through.
func decompress(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 64*1024)
	head, err := br.Peek(4)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("images: read tarball: %w", err)
	}
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("images: gzip: %w", err)
		}
		return zr, func() { zr.Close() }, nil
	case bytes.HasPrefix(head, zstdMagic):
		zr, err := zstd.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("images: zstd: %w", err)
		}
		return zr, zr.Close, nil
	default:
		return br, func() {}, nil
	}
}

// ociRefName turns an OCI org.opencontainers.image.ref.name annotation
// into an image name: full references are normalized; bare tags (which
// some tools write) give no name.
func ociRefName(name string) string {
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil || !strings.ContainsAny(name, "/:@") {
		return ""
	}
	return reference.TagNameOnly(named).String()
}

// Import reads a docker-archive or OCI image-layout tarball (optionally
// gzip- or zstd-compressed), stores every image it names, unpacks them into
// the snapshotter and returns them. Imported images are pinned: GC keeps
// them.
func (s *Store) Import(ctx context.Context, r io.Reader) ([]Image, error) {
	ctx = s.ctx(ctx)
	plain, closeFn, err := decompress(r)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	recs, err := s.client.Import(ctx, plain,
		client.WithImageRefTranslator(ociRefName),
		client.WithImageLabels(map[string]string{PinnedLabel: "pinned"}),
	)
	if err != nil {
		return nil, fmt.Errorf("images: import: %w", err)
	}
	if len(recs) == 0 {
		return nil, errors.New("images: import: the tarball names no image")
	}
	out := make([]Image, 0, len(recs))
	for _, rec := range recs {
		if err := s.unpack(ctx, rec); err != nil {
			return out, err
		}
		img, err := s.describe(ctx, rec)
		if err != nil {
			return out, err
		}
		s.log.Info("imported image", "image", img.Ref, "id", img.ID)
		out = append(out, img)
	}
	return out, nil
}

// ImportDir imports every regular file of dir whose name ends in .tar,
// .tar.gz, .tgz, .tar.zst or .tzst, in name order. A missing dir is not an
// error; a bad tarball does not stop the others (the errors are joined).
func (s *Store) ImportDir(ctx context.Context, dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("images: import dir: %w", err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !isTarball(e.Name()) {
			continue
		}
		if err := s.importFile(ctx, filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func isTarball(name string) bool {
	for _, suf := range tarballSuffixes {
		if strings.HasSuffix(name, suf) {
			return true
		}
	}
	return false
}

func (s *Store) importFile(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("images: %w", err)
	}
	defer f.Close()
	if _, err := s.Import(ctx, f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
