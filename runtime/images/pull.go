package images

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/platforms"
	corev1 "k8s.io/api/core/v1"
)

// Ensure makes the image ref available as imagePullPolicy asks and returns
// it:
//   - Never: the local image, or ErrNotPresent (wrapped) — the kubelet's
//     ErrImageNeverPull;
//   - IfNotPresent (and ""): the local image, else a pull;
//   - Always: a pull; a failed pull fails even when a local copy exists,
//     as the kubelet does.
//
// A failed pull returns ErrPull (wrapped) with the registry's error.
// creds are the pod's pull secrets.
func (s *Store) Ensure(ctx context.Context, ref string, policy corev1.PullPolicy, creds []Credential) (Image, error) {
	name, err := normalize(ref)
	if err != nil {
		return Image{}, err
	}
	// An image already present and unpacked needs no lock: the per-name
	// lock only keeps pods starting together from pulling (or unpacking)
	// one image twice. Holding it for the look-up too queued every pod of
	// a node behind the others' containerd round trips.
	if policy != corev1.PullAlways {
		if img, ok := s.ready(ctx, name); ok {
			return img, nil
		}
	}
	unlock := s.lockName(name)
	defer unlock()
	switch policy {
	case corev1.PullNever, corev1.PullIfNotPresent, "":
		img, err := s.local(ctx, name)
		if err == nil {
			return img, nil
		}
		if !errors.Is(err, ErrNotPresent) {
			return Image{}, err
		}
		if policy == corev1.PullNever {
			return Image{}, fmt.Errorf("%w: container image %q is not present with pull policy of Never", ErrNotPresent, ref)
		}
	case corev1.PullAlways:
	default:
		return Image{}, fmt.Errorf("images: unknown pull policy %q", policy)
	}
	return s.pull(ctx, name, creds)
}

// local returns the image if it is in the store, unpacking it into the
// snapshotter if needed.
func (s *Store) local(ctx context.Context, name string) (Image, error) {
	img, err := s.Get(ctx, name)
	if err != nil {
		return Image{}, err
	}
	ctx = s.ctx(ctx)
	rec, err := s.client.ImageService().Get(ctx, name)
	if err != nil {
		return Image{}, fmt.Errorf("images: get %s: %w", name, err)
	}
	if err := s.unpack(ctx, rec); err != nil {
		return Image{}, err
	}
	return img, nil
}

// ready returns the image if it is in the store and already unpacked;
// ok is false otherwise (and on any error: Ensure then looks again under
// the image's lock).
func (s *Store) ready(ctx context.Context, name string) (img Image, ok bool) {
	img, err := s.Get(ctx, name)
	if err != nil {
		return Image{}, false
	}
	ctx = s.ctx(ctx)
	rec, err := s.client.ImageService().Get(ctx, name)
	if err != nil {
		return Image{}, false
	}
	unpacked, err := client.NewImageWithPlatform(s.client, rec, platforms.Default()).IsUnpacked(ctx, s.cfg.Snapshotter)
	if err != nil || !unpacked {
		return Image{}, false
	}
	return img, true
}

// pull fetches name through the mirrors and registry of registries.yaml
// and unpacks it.
func (s *Store) pull(ctx context.Context, name string, creds []Credential) (Image, error) {
	ctx = s.ctx(ctx)
	resolver := docker.NewResolver(docker.ResolverOptions{Hosts: s.registries.hosts(creds)})
	s.log.Info("pulling image", "image", name)
	pulled, err := s.client.Pull(ctx, name,
		client.WithResolver(resolver),
		client.WithPullUnpack,
		client.WithPullSnapshotter(s.cfg.Snapshotter),
	)
	if err != nil {
		return Image{}, fmt.Errorf("%w: %s: %w", ErrPull, name, err)
	}
	img, err := s.describe(ctx, pulled.Metadata())
	if err != nil {
		return Image{}, err
	}
	s.log.Info("pulled image", "image", img.Ref, "id", img.ID, "size", img.Size)
	return img, nil
}

// lockName serialises Ensure per image name, so pods starting together
// pull an image once; it returns the unlock function.
func (s *Store) lockName(name string) func() {
	s.mu.Lock()
	if s.pulling == nil {
		s.pulling = map[string]*nameLock{}
	}
	l := s.pulling[name]
	if l == nil {
		l = &nameLock{}
		s.pulling[name] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.pulling, name)
		}
		s.mu.Unlock()
	}
}

// nameLock is the lock of one image name and the number of its holders
// and waiters.
type nameLock struct {
	mu   sync.Mutex
	refs int
}
