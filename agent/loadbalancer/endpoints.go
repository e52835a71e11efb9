package loadbalancer

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// The Endpoints the servers keep listing themselves, as kube-apiserver's
// endpoint reconciler does.
const (
	endpointsNamespace = metav1.NamespaceDefault
	endpointsName      = "kubernetes"
	httpsPort          = "https"
)

// Updater takes a server list (an *LB).
type Updater interface {
	Update(servers []string)
}

// WatchEndpoints feeds lb the servers of the default/kubernetes Endpoints
// (every ready address with the port named "https") until ctx ends,
// re-listing with back-off (1 s doubling to 30 s) whenever the watch
// fails. The watch goes through the balancer itself, so it follows the
// failover it drives. It returns nil when ctx ends.
func WatchEndpoints(ctx context.Context, client kubernetes.Interface, lb Updater, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	const minBackoff, maxBackoff = time.Second, 30 * time.Second
	backoff := minBackoff
	for {
		started := time.Now()
		err := watchEndpointsOnce(ctx, client, lb)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) > time.Minute {
			backoff = minBackoff
		}
		if err != nil {
			log.Warn("watching the default/kubernetes endpoints", "err", err, "retry-in", backoff)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if err != nil {
			backoff = min(backoff*2, maxBackoff)
		}
	}
}

// watchEndpointsOnce lists and then watches the Endpoints until the watch
// ends (nil: a normal end, the caller watches again) or fails.
func watchEndpointsOnce(ctx context.Context, client kubernetes.Interface, lb Updater) error {
	eps := client.CoreV1().Endpoints(endpointsNamespace)
	sel := fields.OneTermEqualSelector("metadata.name", endpointsName).String()
	list, err := eps.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	for i := range list.Items {
		apply(&list.Items[i], lb)
	}
	w, err := eps.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if ep, ok := ev.Object.(*corev1.Endpoints); ok {
					apply(ep, lb)
				}
			case watch.Error:
				return fmt.Errorf("watch: %w", apierrors.FromObject(ev.Object))
			}
			// Deleted: keep the servers we know; the servers recreate it.
		}
	}
}

func apply(ep *corev1.Endpoints, lb Updater) {
	if (ep.Namespace != "" && ep.Namespace != endpointsNamespace) || ep.Name != endpointsName {
		return
	}
	if servers := ServersFromEndpoints(ep); len(servers) > 0 {
		lb.Update(servers)
	}
}

// ServersFromEndpoints is host:port for every ready address of ep × its
// port named "https", sorted (so the list, and the failover order, is the
// same on every agent whatever order the servers wrote).
func ServersFromEndpoints(ep *corev1.Endpoints) []string {
	var out []string
	for _, sub := range ep.Subsets {
		for _, p := range sub.Ports {
			if p.Name != httpsPort || p.Port <= 0 {
				continue
			}
			for _, a := range sub.Addresses {
				if a.IP == "" {
					continue
				}
				s := net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port)))
				if !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}
