// Package flowcontrol is API Priority and Fairness: the API server asks it
// before running each request, and it classifies the request by the
// FlowSchemas (highest precedence first) to a priority level whose seats
// bound how many of its requests execute at once. Requests beyond the seats
// wait in the level's queues, or are rejected with 429 when the queues are
// full, the wait is too long, or the level rejects at once.
//
// The package also keeps the configuration: it follows FlowSchemas and
// PriorityLevelConfigurations through informers, reports each FlowSchema's
// Dangling condition, and maintains the bootstrap objects (package
// bootstrap) as upstream's config-producing controller does.
//
// What is implemented of upstream's design: seats per level by share of
// the server's concurrency limit (no borrowing between levels:
// lendablePercent and borrowingLimitPercent do not move seats), shuffle
// sharding of flows onto queues, and round-robin between queues when a
// seat frees (upstream's fair queuing orders by virtual finish time; every
// request costs one seat here).
package flowcontrol

import (
	"context"
	"hash/fnv"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"skiff/server/auth"
	"skiff/server/flowcontrol/bootstrap"
)

// Config tunes the flow control.
type Config struct {
	// ServerConcurrencyLimit is the seats of all priority levels together
	// (upstream: --max-requests-inflight + --max-mutating-requests-inflight,
	// 600 by default).
	ServerConcurrencyLimit int
	// QueueWaitLimit is the longest a request without a deadline waits in
	// a queue (15 s, upstream's default); one with a deadline waits a
	// quarter of it, at most a minute.
	QueueWaitLimit time.Duration
	// EnsureInterval is how often the bootstrap objects are brought back to
	// their specs (a minute, as upstream).
	EnsureInterval time.Duration
	// Metrics registers the apiserver_flowcontrol_* series (optional).
	Metrics prometheus.Registerer
	Logger  *slog.Logger
}

// Controller decides when each request runs.
type Controller struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	snap    atomic.Pointer[snapshot]
	// ensured is set once the bootstrap objects have been made.
	ensured atomic.Bool

	mu     sync.Mutex        // serializes rebuilds
	levels map[string]*level // the levels of the current configuration
}

// snapshot is one configuration, read without locks by every request.
type snapshot struct {
	// schemas are the usable FlowSchemas in matching order.
	schemas []*flowcontrolv1.FlowSchema
	levels  map[string]boundLevel
}

// boundLevel is a level and the UID of the object it is configured from.
type boundLevel struct {
	*level
	uid types.UID
}

// New returns a controller serving the mandatory configuration (system:masters
// exempt, everyone else in catch-all) until Run has read the real one.
func New(cfg Config) *Controller {
	if cfg.ServerConcurrencyLimit <= 0 {
		cfg.ServerConcurrencyLimit = 600
	}
	if cfg.QueueWaitLimit <= 0 {
		cfg.QueueWaitLimit = 15 * time.Second
	}
	if cfg.EnsureInterval <= 0 {
		cfg.EnsureInterval = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Controller{cfg: cfg, log: cfg.Logger, metrics: newMetrics(cfg.Metrics), levels: map[string]*level{}}
	c.rebuild(nil, nil)
	return c
}

// Ready reports whether the bootstrap configuration exists (upstream's
// priority-and-fairness-config-producer post-start hook).
func (c *Controller) Ready() bool { return c.ensured.Load() }

// Upstream's long-running requests: they hold no seat, as they would hold
// it for their whole life. Watches do take a seat for their start.
var longRunningSubresources = map[string]bool{"attach": true, "exec": true, "proxy": true, "log": true, "portforward": true}

func noop() {}

// Admit classifies a request and waits for its turn. It sets the headers
// that name the matched FlowSchema and priority level in h, and returns the
// function to call when the request is done, or a 429 error.
func (c *Controller) Admit(r *http.Request, h http.Header, a auth.Attributes) (func(), error) {
	if a.ResourceRequest && (a.Verb == "proxy" || longRunningSubresources[a.Subresource]) {
		return noop, nil
	}
	snap := c.snap.Load()
	fs, lvl := snap.classify(&a)
	h.Set(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID, string(fs.UID))
	h.Set(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID, string(lvl.uid))
	ctx, cancel := c.waitContext(r.Context())
	defer cancel()
	if err := lvl.acquire(ctx, flowHash(fs.Name, distinguisher(&a, fs))); err != nil {
		c.metrics.rejected.WithLabelValues(fs.Name, lvl.name, err.Error()).Inc()
		h.Set("Retry-After", "1")
		return nil, apierrors.NewTooManyRequests("Too many requests, please try again later.", 1)
	}
	c.metrics.dispatched.WithLabelValues(fs.Name, lvl.name).Inc()
	if a.Verb == "watch" {
		// A watch's seat covers only its start; here that is the
		// moment it is admitted.
		lvl.release()
		return noop, nil
	}
	return sync.OnceFunc(lvl.release), nil
}

// waitContext bounds the time in a queue as upstream does.
func (c *Controller) waitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	limit := c.cfg.QueueWaitLimit
	if deadline, ok := ctx.Deadline(); ok {
		limit = time.Until(deadline) / 4
	}
	return context.WithTimeout(ctx, min(limit, time.Minute))
}

// classify finds the first matching FlowSchema; catch-all is always there.
func (s *snapshot) classify(a *auth.Attributes) (*flowcontrolv1.FlowSchema, boundLevel) {
	for _, fs := range s.schemas {
		if matchesFlowSchema(a, fs) {
			return fs, s.levels[fs.Spec.PriorityLevelConfiguration.Name]
		}
	}
	last := s.schemas[len(s.schemas)-1] // catch-all by construction
	return last, s.levels[last.Spec.PriorityLevelConfiguration.Name]
}

func flowHash(schema, distinguisher string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(schema))
	h.Write([]byte{0})
	h.Write([]byte(distinguisher))
	return h.Sum64()
}

// rebuild makes the configuration of the given objects the current one and
// returns, for each FlowSchema, whether its priority level exists. Missing
// mandatory objects are imagined, as upstream does, so there is always an
// exempt and a catch-all.
func (c *Controller) rebuild(schemas []*flowcontrolv1.FlowSchema, levels []*flowcontrolv1.PriorityLevelConfiguration) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	pls := map[string]*flowcontrolv1.PriorityLevelConfiguration{}
	for _, pl := range levels {
		if wellFormed(pl) {
			pls[pl.Name] = pl
		}
	}
	for _, pl := range bootstrap.MandatoryPriorityLevelConfigurations() {
		if pls[pl.Name] == nil {
			pls[pl.Name] = pl
		}
	}
	shareSum := 0.0
	for _, pl := range pls {
		shareSum += float64(shares(pl))
	}
	next := &snapshot{levels: map[string]boundLevel{}}
	for name, pl := range pls {
		l := c.levels[name]
		if l == nil {
			l = newLevel(name, c.metrics.forLevel(name))
		}
		s := settingsOf(pl, c.cfg.ServerConcurrencyLimit, shareSum)
		l.configure(s)
		c.metrics.nominal.WithLabelValues(name).Set(float64(s.seats))
		next.levels[name] = boundLevel{level: l, uid: pl.UID}
	}
	for name := range c.levels {
		if pls[name] == nil {
			c.metrics.forget(name) // requests in it finish; new ones go elsewhere
		}
	}
	c.levels = map[string]*level{}
	for name, b := range next.levels {
		c.levels[name] = b.level
	}

	found := map[string]bool{}
	have := map[string]bool{}
	for _, fs := range schemas {
		_, ok := pls[fs.Spec.PriorityLevelConfiguration.Name]
		found[fs.Name] = ok
		if ok {
			next.schemas = append(next.schemas, fs)
			have[fs.Name] = true
		}
	}
	sort.SliceStable(next.schemas, func(i, j int) bool {
		a, b := next.schemas[i], next.schemas[j]
		if a.Spec.MatchingPrecedence != b.Spec.MatchingPrecedence {
			return a.Spec.MatchingPrecedence < b.Spec.MatchingPrecedence
		}
		return a.Name < b.Name
	})
	if !have[flowcontrolv1.FlowSchemaNameExempt] {
		next.schemas = append([]*flowcontrolv1.FlowSchema{bootstrap.MandatoryFlowSchemaExempt()}, next.schemas...)
	}
	if !have[flowcontrolv1.FlowSchemaNameCatchAll] {
		next.schemas = append(next.schemas, bootstrap.MandatoryFlowSchemaCatchAll())
	} else {
		// classify falls back to the last schema: make it catch-all even
		// if another schema shares its precedence.
		for i, fs := range next.schemas {
			if fs.Name == flowcontrolv1.FlowSchemaNameCatchAll {
				next.schemas = append(append(next.schemas[:i:i], next.schemas[i+1:]...), fs)
				break
			}
		}
	}
	c.snap.Store(next)
	return found
}

// wellFormed: the union of the spec agrees with its type and name (the
// server's validation ensures it; objects are checked anyway, as upstream
// does, since a bad one must not break classification).
func wellFormed(pl *flowcontrolv1.PriorityLevelConfiguration) bool {
	s := pl.Spec
	if (s.Type == flowcontrolv1.PriorityLevelEnablementLimited) != (s.Limited != nil) ||
		(s.Type == flowcontrolv1.PriorityLevelEnablementExempt) != (s.Exempt != nil) ||
		(s.Type == flowcontrolv1.PriorityLevelEnablementExempt) != (pl.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt) {
		return false
	}
	if l := s.Limited; l != nil && (l.LimitResponse.Type == flowcontrolv1.LimitResponseTypeReject) == (l.LimitResponse.Queuing != nil) {
		return false
	}
	return true
}

func shares(pl *flowcontrolv1.PriorityLevelConfiguration) int32 {
	switch {
	case pl.Spec.Limited != nil && pl.Spec.Limited.NominalConcurrencyShares != nil:
		return *pl.Spec.Limited.NominalConcurrencyShares
	case pl.Spec.Limited != nil:
		return 30 // the v1 default
	case pl.Spec.Exempt != nil && pl.Spec.Exempt.NominalConcurrencyShares != nil:
		return *pl.Spec.Exempt.NominalConcurrencyShares
	}
	return 0
}

// settingsOf gives a level ceil(limit * shares / sum) seats, as upstream
// computes its nominal concurrency limit. A level of zero shares still gets
// one seat: without borrowing from other levels it would never run anything.
func settingsOf(pl *flowcontrolv1.PriorityLevelConfiguration, serverLimit int, shareSum float64) levelSettings {
	if pl.Spec.Type == flowcontrolv1.PriorityLevelEnablementExempt {
		return levelSettings{exempt: true}
	}
	seats := 1
	if shareSum > 0 {
		seats = max(1, int(math.Ceil(float64(serverLimit)*float64(shares(pl))/shareSum)))
	}
	s := levelSettings{seats: seats, reject: true}
	if q := pl.Spec.Limited.LimitResponse.Queuing; q != nil {
		s.reject = false
		s.queues, s.handSize, s.queueLength = int(q.Queues), int(q.HandSize), int(q.QueueLengthLimit)
	}
	return s
}
