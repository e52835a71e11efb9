package members

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"skiff/server/controller/worker"
	"skiff/store"
)

// Config is what a NodeController needs.
type Config struct {
	// Client watches the Nodes; it must be allowed to list and watch them.
	Client kubernetes.Interface
	// Cluster is the membership the deleted servers are removed from.
	Cluster Cluster
	// Logger receives the removals and failures (slog.Default() if nil).
	Logger *slog.Logger
}

// NodeController removes a server from the cluster when its Node is
// deleted, so that `kubectl delete node <server>` takes the server out as
// `skiff server members remove` does. A Node that is not a member (an
// agent) is left alone, and so is the last member or voter. A removal the
// cluster cannot make now (store.ErrUnavailable: no leader or quorum) is
// retried with a growing delay until it succeeds or the controller stops;
// other failures are retried a few times, then given up (and logged).
//
// It acts on deletions it sees while it runs: a Node deleted while no
// server ran the controller keeps its member (remove it with the command).
// Every server may run one: a removal is idempotent.
type NodeController struct {
	cfg Config
	log *slog.Logger

	// Retry spacing and the attempts a failure other than
	// store.ErrUnavailable gets; tests shorten them.
	minDelay, maxDelay time.Duration
	maxAttempts        int
	// afterSync, if set, is called after each attempt (tests).
	afterSync func(name string, err error)
}

// NewNodeController makes a controller; Run runs it.
func NewNodeController(cfg Config) *NodeController {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &NodeController{cfg: cfg, log: log, minDelay: 200 * time.Millisecond, maxDelay: 30 * time.Second, maxAttempts: 5}
}

// Run watches the Nodes and removes the members of deleted ones until ctx
// ends; it returns once its informer and worker have stopped. It returns
// an error only when it cannot start.
func (c *NodeController) Run(ctx context.Context) error {
	if c.cfg.Client == nil || c.cfg.Cluster == nil {
		return errors.New("members: NodeController needs a Client and a Cluster")
	}
	q := worker.New(worker.Config{
		Name:        "skiff-members",
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[string](c.minDelay, c.maxDelay),
		Log:         c.log,
		Message:     "could not remove the deleted node's member; retrying",
		Noun:        "node",
	})
	// Only names matter: the cache keeps no more of a Node.
	factory := informers.NewSharedInformerFactoryWithOptions(c.cfg.Client, 0, informers.WithTransform(nameOnly))
	inf := factory.Core().V1().Nodes().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: q.Enqueue}); err != nil {
		q.ShutDown()
		return fmt.Errorf("members: watch nodes: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown() // waits for the informer, which stops with ctx
	q.Run(ctx, 1, func(ctx context.Context, name string) error {
		err := c.sync(ctx, name)
		if err != nil && !errors.Is(err, store.ErrUnavailable) && ctx.Err() == nil && q.NumRequeues(name)+1 >= c.maxAttempts {
			c.log.Error("giving up removing the deleted node's member", "node", name, "attempts", c.maxAttempts, "err", err)
			err = nil
		}
		if c.afterSync != nil {
			c.afterSync(name, err)
		}
		return err
	})
	return nil
}

// sync removes the member named as the deleted Node, if there is one and
// removing it leaves a cluster.
func (c *NodeController) sync(ctx context.Context, name string) error {
	ms, err := c.cfg.Cluster.Members(ctx)
	if err != nil {
		return fmt.Errorf("list members: %w", err)
	}
	if !isMember(ms, name) {
		c.log.Debug("deleted node is not a server: no member to remove", "node", name)
		return nil
	}
	if reason := refusal(ms, name); reason != "" {
		c.log.Warn("node deleted, its member kept: "+reason, "node", name)
		return nil
	}
	c.log.Info("node deleted: removing its member from the cluster", "node", name)
	if err := c.cfg.Cluster.RemoveMember(ctx, name); err != nil {
		return fmt.Errorf("remove member: %w", err)
	}
	c.log.Info("member removed", "node", name)
	return nil
}

// nameOnly strips a Node to what the informer and the controller use.
func nameOnly(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion}}, nil
	}
	return obj, nil
}
