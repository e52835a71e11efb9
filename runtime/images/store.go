package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/containerd/containerd/v2/client"
	cimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/distribution/reference"
)

// DefaultSnapshotter is used when Config.Snapshotter is empty.
const DefaultSnapshotter = "overlayfs"

// PinnedLabel marks images the garbage collector never removes: images
// imported from tarballs, which an air-gapped machine cannot pull again.
// The name and value are those of containerd's CRI plugin, which k3s uses.
const PinnedLabel = "io.cri-containerd.pinned"

// ErrInvalidReference is returned for an image name that does not parse.
var ErrInvalidReference = errors.New("invalid image reference")

// Config configures a Store.
type Config struct {
	Client *client.Client
	// Namespace is the containerd namespace of every call (required).
	Namespace string
	// Snapshotter images are unpacked into; empty means "overlayfs".
	Snapshotter string
	// RegistriesFile is a k3s-style registries.yaml (mirrors, auth, TLS);
	// optional, and a missing file is the same as none.
	RegistriesFile string
	Logger         *slog.Logger
	// ImageFSPath is a path on the filesystem that holds the images, which
	// GC measures. Empty: the snapshotter's root as containerd reports it.
	ImageFSPath string
}

// Store imports, pulls, lists and removes images in one containerd
// namespace.
type Store struct {
	cfg        Config
	client     *client.Client
	log        *slog.Logger
	registries *Registries
	mu         sync.Mutex
	pulling    map[string]*nameLock
	// fsUsage replaces ImageFS in tests.
	fsUsage func(context.Context) (FSUsage, error)
}

// New returns a Store. It reads cfg.RegistriesFile now.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("images: Config.Client is nil")
	}
	if cfg.Namespace == "" {
		return nil, errors.New("images: Config.Namespace is empty")
	}
	if cfg.Snapshotter == "" {
		cfg.Snapshotter = DefaultSnapshotter
	}
	s := &Store{cfg: cfg, client: cfg.Client, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("component", "images")
	regs, err := LoadRegistries(cfg.RegistriesFile)
	if err != nil {
		return nil, err
	}
	s.registries = regs
	return s, nil
}

// Normalize returns the full reference Docker would use for ref
// ("busybox" → "docker.io/library/busybox:latest"); a name that does not
// parse is returned unchanged.
func Normalize(ref string) string {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return ref
	}
	return named.String()
}

// normalize is Normalize with an error for names that do not parse.
func normalize(ref string) (string, error) {
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %w", ErrInvalidReference, ref, err)
	}
	return named.String(), nil
}

func (s *Store) ctx(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, s.cfg.Namespace)
}

// Get returns the image named ref (normalized first); ErrNotPresent
// (wrapped) if the store does not have it.
func (s *Store) Get(ctx context.Context, ref string) (Image, error) {
	name, err := normalize(ref)
	if err != nil {
		return Image{}, err
	}
	ctx = s.ctx(ctx)
	img, err := s.client.ImageService().Get(ctx, name)
	if errdefs.IsNotFound(err) {
		return Image{}, fmt.Errorf("%w: %s", ErrNotPresent, name)
	}
	if err != nil {
		return Image{}, fmt.Errorf("images: get %s: %w", name, err)
	}
	return s.describe(ctx, img)
}

// describe returns the Image of a containerd image record. Images whose
// content for this platform is missing are reported as not present.
func (s *Store) describe(ctx context.Context, rec cimages.Image) (Image, error) {
	img := client.NewImageWithPlatform(s.client, rec, platforms.Default())
	cfg, err := img.Config(ctx)
	if errdefs.IsNotFound(err) {
		return Image{}, fmt.Errorf("%w: %s: content missing: %w", ErrNotPresent, rec.Name, err)
	}
	if err != nil {
		return Image{}, fmt.Errorf("images: config of %s: %w", rec.Name, err)
	}
	size, err := img.Size(ctx)
	if err != nil {
		return Image{}, fmt.Errorf("images: size of %s: %w", rec.Name, err)
	}
	return Image{Ref: rec.Name, ID: cfg.Digest.String(), Size: size}, nil
}

// List returns every named image of the namespace, sorted by Ref. Records
// that are not image references (digest-only names) or whose content is
// incomplete are left out.
func (s *Store) List(ctx context.Context) ([]Image, error) {
	recs, err := s.records(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Image, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.Image)
	}
	return out, nil
}

// record is an Image with its containerd metadata.
type record struct {
	Image
	rec cimages.Image
}

func (s *Store) records(ctx context.Context) ([]record, error) {
	ctx = s.ctx(ctx)
	recs, err := s.client.ImageService().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("images: list: %w", err)
	}
	out := make([]record, 0, len(recs))
	for _, rec := range recs {
		if _, err := reference.ParseNormalizedNamed(rec.Name); err != nil {
			continue
		}
		img, err := s.describe(ctx, rec)
		if err != nil {
			s.log.Debug("skipping image", "image", rec.Name, "err", err)
			continue
		}
		out = append(out, record{Image: img, rec: rec})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}

// unpack makes sure the image's layers are in the snapshotter.
func (s *Store) unpack(ctx context.Context, rec cimages.Image) error {
	img := client.NewImageWithPlatform(s.client, rec, platforms.Default())
	ok, err := img.IsUnpacked(ctx, s.cfg.Snapshotter)
	if err == nil && ok {
		return nil
	}
	if err := img.Unpack(ctx, s.cfg.Snapshotter); err != nil {
		return fmt.Errorf("images: unpack %s into %s: %w", rec.Name, s.cfg.Snapshotter, err)
	}
	return nil
}
