package resourcequota

import (
	"context"
	"log/slog"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"skiff/server/controller/worker"
)

// monitors follow the deletions of the counted resources that have no
// typed informer (configmaps, secrets, replica sets, custom resources...),
// as upstream's quota monitor does: a create is charged by admission, but
// only a watch sees the usage come back. A monitor runs only while some
// quota counts its resource, so a cluster with no such quota watches
// nothing extra.
type monitors struct {
	metadata metadata.Interface
	log      *slog.Logger
	// deleted is called with the namespace of each deleted object;
	// synced once a monitor has its initial list, since what was deleted
	// before it started was never seen.
	deleted func(gr schema.GroupResource, namespace string)
	synced  func(gr schema.GroupResource)

	mu      sync.Mutex
	running map[schema.GroupResource]*monitor
	wg      sync.WaitGroup
}

type monitor struct {
	gvr  schema.GroupVersionResource
	stop context.CancelFunc
}

func newMonitors(md metadata.Interface, log *slog.Logger, deleted func(schema.GroupResource, string), synced func(schema.GroupResource)) *monitors {
	return &monitors{metadata: md, log: log, deleted: deleted, synced: synced, running: map[schema.GroupResource]*monitor{}}
}

// ensure runs a monitor of gr at version gvr until ctx ends or retain
// drops it; a monitor of another version is replaced.
func (m *monitors) ensure(ctx context.Context, gr schema.GroupResource, gvr schema.GroupVersionResource) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	if cur := m.running[gr]; cur != nil {
		if cur.gvr == gvr {
			return
		}
		cur.stop()
	}
	inf := metadatainformer.NewFilteredMetadataInformer(m.metadata, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	if err := inf.SetTransform(slim); err != nil {
		m.log.Warn("resource quota monitor", "resource", gvr.String(), "err", err)
		return
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if o, ok := worker.Unwrap[*metav1.PartialObjectMetadata](obj); ok {
			m.deleted(gr, o.Namespace)
		}
	}})
	if err != nil {
		m.log.Warn("resource quota monitor", "resource", gvr.String(), "err", err)
		return
	}
	mctx, stop := context.WithCancel(ctx)
	m.running[gr] = &monitor{gvr: gvr, stop: stop}
	m.wg.Go(func() { inf.Run(mctx.Done()) })
	m.wg.Go(func() {
		if cache.WaitForCacheSync(mctx.Done(), inf.HasSynced) {
			m.synced(gr)
		}
	})
	m.log.Debug("resource quota monitor started", "resource", gvr.String())
}

// retain stops the monitors of resources no quota counts any more.
func (m *monitors) retain(keep map[schema.GroupResource]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for gr, mon := range m.running {
		if !keep[gr] {
			mon.stop()
			delete(m.running, gr)
			m.log.Debug("resource quota monitor stopped", "resource", mon.gvr.String())
		}
	}
}

// wait returns once every monitor has stopped; the context given to
// ensure must have ended.
func (m *monitors) wait() { m.wg.Wait() }

// slim keeps only what a deletion needs, the namespace and name: the
// monitors hold every object of the resources they follow.
func slim(obj any) (any, error) {
	if o, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return &metav1.PartialObjectMetadata{TypeMeta: o.TypeMeta, ObjectMeta: metav1.ObjectMeta{
			Namespace: o.Namespace, Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion,
		}}, nil
	}
	return obj, nil
}
