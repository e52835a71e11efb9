package images

import (
	"context"
	"errors"
	"fmt"
	"sort"

	cimages "github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"
)

// FSUsage is the size and free space of a filesystem, in bytes.
type FSUsage struct {
	Capacity, Available int64
}

// UsedPct is the used share of the filesystem in percent (0–100).
func (u FSUsage) UsedPct() int {
	if u.Capacity <= 0 {
		return 0
	}
	return 100 - int(u.Available*100/u.Capacity)
}

// ImageFS returns the usage of the filesystem that holds the images
// (Config.ImageFSPath, else the snapshotter root containerd reports).
func (s *Store) ImageFS(ctx context.Context) (FSUsage, error) {
	path, err := s.imageFSPath(ctx)
	if err != nil {
		return FSUsage{}, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return FSUsage{}, fmt.Errorf("images: statfs %s: %w", path, err)
	}
	return FSUsage{Capacity: int64(st.Blocks) * st.Bsize, Available: int64(st.Bavail) * st.Bsize}, nil
}

func (s *Store) imageFSPath(ctx context.Context) (string, error) {
	if s.cfg.ImageFSPath != "" {
		return s.cfg.ImageFSPath, nil
	}
	id := "io.containerd.snapshotter.v1." + s.cfg.Snapshotter
	resp, err := s.client.IntrospectionService().Plugins(s.ctx(ctx), "id=="+s.cfg.Snapshotter)
	if err != nil {
		return "", fmt.Errorf("images: introspect %s: %w", id, err)
	}
	for _, p := range resp.Plugins {
		if p.Type+"."+p.ID == id && p.Exports["root"] != "" {
			return p.Exports["root"], nil
		}
	}
	return "", fmt.Errorf("images: containerd does not report the root of %s: set ImageFSPath", id)
}

// GC removes images whose ID is not in inUse, oldest first, while the
// image filesystem is used above highPct, until it is below lowPct.
// Pinned images (imported from tarballs) are kept. It returns the bytes
// freed (the sizes of the removed images).
func (s *Store) GC(ctx context.Context, inUse map[string]bool, highPct, lowPct int) (int64, error) {
	if lowPct > highPct {
		return 0, fmt.Errorf("images: GC low threshold %d%% above high threshold %d%%", lowPct, highPct)
	}
	measure := s.fsUsage
	if measure == nil {
		measure = s.ImageFS
	}
	usage, err := measure(ctx)
	if err != nil {
		return 0, err
	}
	if usage.UsedPct() < highPct {
		return 0, nil
	}
	toFree := usage.Capacity*int64(100-lowPct)/100 - usage.Available
	victims, err := s.gcCandidates(ctx, inUse)
	if err != nil {
		return 0, err
	}
	s.log.Info("image filesystem above threshold; removing unused images",
		"used_pct", usage.UsedPct(), "high_pct", highPct, "low_pct", lowPct, "to_free", toFree, "candidates", len(victims))
	var freed int64
	var errs []error
	for _, v := range victims {
		if freed >= toFree {
			break
		}
		if err := s.removeImage(ctx, v); err != nil {
			errs = append(errs, err)
			continue
		}
		freed += v.size
	}
	if freed < toFree {
		errs = append(errs, fmt.Errorf("images: GC freed %d of %d bytes wanted", freed, toFree))
	}
	return freed, errors.Join(errs...)
}

// gcImage is one image ID with every name that points at it.
type gcImage struct {
	id      string
	names   []string
	size    int64
	created int64
}

// gcCandidates groups images by ID and returns the unused, unpinned ones,
// oldest first.
func (s *Store) gcCandidates(ctx context.Context, inUse map[string]bool) ([]*gcImage, error) {
	recs, err := s.records(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]*gcImage{}
	pinned := map[string]bool{}
	for _, r := range recs {
		if r.rec.Labels[PinnedLabel] == "pinned" {
			pinned[r.ID] = true
		}
		g := byID[r.ID]
		if g == nil {
			g = &gcImage{id: r.ID, size: r.Size, created: r.rec.CreatedAt.UnixNano()}
			byID[r.ID] = g
		}
		g.names = append(g.names, r.Ref)
		g.created = min(g.created, r.rec.CreatedAt.UnixNano())
	}
	var out []*gcImage
	for id, g := range byID {
		if !inUse[id] && !pinned[id] {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].created != out[j].created {
			return out[i].created < out[j].created
		}
		return out[i].id < out[j].id
	})
	return out, nil
}

// removeImage deletes every name of an image; the last deletion waits
// for containerd's garbage collection so the space is really freed.
func (s *Store) removeImage(ctx context.Context, g *gcImage) error {
	ctx = s.ctx(ctx)
	is := s.client.ImageService()
	for i, name := range g.names {
		var opts []cimages.DeleteOpt
		if i == len(g.names)-1 {
			opts = append(opts, cimages.SynchronousDelete())
		}
		if err := is.Delete(ctx, name, opts...); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("images: remove %s: %w", name, err)
		}
	}
	s.log.Info("removed unused image", "id", g.id, "names", g.names, "size", g.size)
	return nil
}
