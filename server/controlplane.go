package server

import (
	"context"
	"crypto"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/record"

	"skiff/server/admission/policy"
	"skiff/server/apiserver"
	"skiff/server/auth"
	"skiff/server/certs"
	"skiff/server/controller/certsigning"
	"skiff/server/controller/clusterroleaggregation"
	"skiff/server/controller/cronjob"
	"skiff/server/controller/daemonset"
	"skiff/server/controller/deployment"
	"skiff/server/controller/disruption"
	"skiff/server/controller/endpoints"
	"skiff/server/controller/endpointslice"
	"skiff/server/controller/endpointslicemirroring"
	"skiff/server/controller/eventttl"
	"skiff/server/controller/garbagecollector"
	"skiff/server/controller/job"
	"skiff/server/controller/namespace"
	"skiff/server/controller/nodeipam"
	"skiff/server/controller/nodelifecycle"
	"skiff/server/controller/podgc"
	"skiff/server/controller/replicaset"
	"skiff/server/controller/resourcequota"
	"skiff/server/controller/serviceaccount"
	"skiff/server/controller/servicecidr"
	"skiff/server/controller/servicelb"
	"skiff/server/controller/statefulset"
	"skiff/server/controller/storageversionmigration"
	"skiff/server/controller/ttlafterfinished"
	"skiff/server/leaderelect"
	"skiff/server/scheduler"
)

// Lease names as upstream, so tools that look for them find them.
const (
	controllerManagerLease = "kube-controller-manager"
	schedulerLease         = "kube-scheduler"
)

// loops is what the control loops need from the server.
type loops struct {
	cfg         Config
	caPEM       []byte
	caCert      *x509.Certificate
	caKey       crypto.Signer
	clusterCIDR *net.IPNet
	// controllers and scheduler reach the API in-process under their own
	// identities, so RBAC and admission apply to them as to any client.
	controllers, scheduler kubernetes.Interface
	meta                   metadata.Interface
	dynamic                dynamic.Interface
	log                    *slog.Logger
	// schedulerSettings are the profiles from --scheduler-config.
	schedulerSettings scheduler.Settings
	// election tunes leader election (zero values: upstream's defaults).
	election leaderelect.Config
}

// startControlLoops starts the controller manager and the scheduler, each
// behind its own Lease, as goroutines that end with ctx.
func startControlLoops(ctx context.Context, cfg Config, api *apiserver.Server, bundle *certs.Bundle, log *slog.Logger) error {
	caCert, caKey := bundle.CA()
	l, err := newLoops(cfg, api.Transport, log)
	if err != nil {
		return err
	}
	l.caPEM, l.caCert, l.caKey = bundle.CACertPEM(), caCert, caKey
	l.start(ctx)
	return nil
}

// newLoops makes the clients of the control loops; transport reaches the
// API server as a given user.
func newLoops(cfg Config, transport func(*auth.User) http.RoundTripper, log *slog.Logger) (*loops, error) {
	l := &loops{cfg: cfg, log: log}
	settings, err := scheduler.LoadConfig(cfg.SchedulerConfig)
	if err != nil {
		return nil, fmt.Errorf("--scheduler-config: %w", err)
	}
	l.schedulerSettings = settings
	if cfg.ClusterCIDR != "" {
		_, n, err := net.ParseCIDR(cfg.ClusterCIDR)
		if err != nil {
			return nil, fmt.Errorf("--cluster-cidr %q: %w", cfg.ClusterCIDR, err)
		}
		l.clusterCIDR = n
	}
	cm := &auth.User{Name: "system:kube-controller-manager", Groups: []string{auth.GroupAuthenticated}}
	sched := &auth.User{Name: "system:kube-scheduler", Groups: []string{auth.GroupAuthenticated}}
	if l.controllers, err = kubernetes.NewForConfig(inProcessConfig(transport(cm))); err != nil {
		return nil, err
	}
	if l.meta, err = metadata.NewForConfig(inProcessConfig(transport(cm))); err != nil {
		return nil, err
	}
	if l.dynamic, err = dynamic.NewForConfig(inProcessConfig(transport(cm))); err != nil {
		return nil, err
	}
	if l.scheduler, err = kubernetes.NewForConfig(inProcessConfig(transport(sched))); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *loops) start(ctx context.Context) {
	if !l.cfg.DisableControllers {
		go l.elect(ctx, l.controllers, controllerManagerLease, l.runControllers)
	}
	if !l.cfg.DisableScheduler {
		go l.elect(ctx, l.scheduler, schedulerLease, l.runScheduler)
	}
}

func (l *loops) elect(ctx context.Context, client kubernetes.Interface, lease string, lead func(context.Context)) {
	ec := l.election
	ec.Client, ec.Name, ec.Lead = client, lease, lead
	ec.Logger = l.log
	if err := leaderelect.Run(ctx, ec); err != nil {
		l.log.Error("leader election stopped", "lease", lease, "err", err)
	}
}

// controller is one control loop of the controller manager.
type controller struct {
	name string
	run  func(ctx context.Context, factory informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error
}

// runControllers runs every controller until ctx ends (the lease is lost
// or the server stops) and returns only when all of them have stopped, so
// a new leader never overlaps with this one.
func (l *loops) runControllers(ctx context.Context) {
	factory := informers.NewSharedInformerFactory(l.controllers, 10*time.Minute)
	defer factory.Shutdown()
	events := record.NewBroadcaster(record.WithContext(ctx))
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: l.controllers.CoreV1().Events("")})
	defer events.Shutdown()
	var wg sync.WaitGroup
	for _, c := range l.controllerList() {
		rec := events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: c.name})
		log := l.log.With("controller", c.name)
		wg.Go(func() {
			if err := c.run(ctx, factory, rec, log); err != nil && ctx.Err() == nil {
				log.Error("controller stopped", "err", err)
			}
		})
	}
	wg.Wait()
}

func (l *loops) controllerList() []controller {
	client, meta := l.controllers, l.meta
	return []controller{
		{"garbage-collector-controller", func(ctx context.Context, _ informers.SharedInformerFactory, _ record.EventRecorder, log *slog.Logger) error {
			return garbagecollector.Run(ctx, garbagecollector.Config{Metadata: meta, Discovery: client.Discovery(), Logger: log})
		}},
		{"namespace-controller", func(ctx context.Context, _ informers.SharedInformerFactory, _ record.EventRecorder, log *slog.Logger) error {
			return namespace.Run(ctx, namespace.Config{Client: client, Metadata: meta, Discovery: client.Discovery(), Logger: log})
		}},
		{"resourcequota-controller", func(ctx context.Context, f informers.SharedInformerFactory, _ record.EventRecorder, log *slog.Logger) error {
			return resourcequota.Run(ctx, resourcequota.Config{Client: client, Informers: f, Metadata: meta, Discovery: client.Discovery(), Logger: log})
		}},
		{"clusterrole-aggregation-controller", func(ctx context.Context, _ informers.SharedInformerFactory, _ record.EventRecorder, log *slog.Logger) error {
			return clusterroleaggregation.Run(ctx, clusterroleaggregation.Config{Client: client, Logger: log})
		}},
		{"node-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			grace := l.cfg.NodeMonitorGracePeriod
			return nodelifecycle.Run(ctx, nodelifecycle.Config{Client: client, Informers: f, Recorder: rec, Logger: log,
				NodeMonitorGracePeriod: grace, NodeMonitorPeriod: monitorPeriod(grace)})
		}},
		{"node-ipam-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return nodeipam.Run(ctx, nodeipam.Config{Client: client, Informers: f, Recorder: rec, Logger: log, ClusterCIDR: l.clusterCIDR})
		}},
		{"pod-garbage-collector", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return podgc.Run(ctx, podgc.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"event-ttl-controller", func(ctx context.Context, _ informers.SharedInformerFactory, _ record.EventRecorder, log *slog.Logger) error {
			return eventttl.Run(ctx, eventttl.Config{Client: client, Logger: log})
		}},
		{"validatingadmissionpolicy-status-controller", func(ctx context.Context, f informers.SharedInformerFactory, _ record.EventRecorder, log *slog.Logger) error {
			return policy.RunStatus(ctx, policy.StatusConfig{Client: client, Informers: f, Logger: log})
		}},
		{"certificate-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			if l.caCert == nil {
				<-ctx.Done()
				return nil
			}
			return certsigning.Run(ctx, certsigning.Config{Client: client, Informers: f, Recorder: rec, Logger: log, CACert: l.caCert, CAKey: l.caKey})
		}},
		{"endpointslice-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return endpointslice.Run(ctx, endpointslice.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"endpoint-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return endpoints.Run(ctx, endpoints.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"endpointslice-mirroring-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return endpointslicemirroring.Run(ctx, endpointslicemirroring.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"service-cidr-controller", func(ctx context.Context, f informers.SharedInformerFactory, _ record.EventRecorder, log *slog.Logger) error {
			return servicecidr.Run(ctx, servicecidr.Config{Client: client, Informers: f, Logger: log})
		}},
		{"service-lb-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return servicelb.Run(ctx, servicelb.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"disruption-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return disruption.Run(ctx, disruption.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"replicaset-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return replicaset.Run(ctx, replicaset.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"replicationcontroller-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return replicaset.RunReplicationControllers(ctx, replicaset.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"deployment-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return deployment.Run(ctx, deployment.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"daemonset-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return daemonset.Run(ctx, daemonset.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"statefulset-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return statefulset.Run(ctx, statefulset.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"job-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return job.Run(ctx, job.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"cronjob-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return cronjob.Run(ctx, cronjob.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"ttl-after-finished-controller", func(ctx context.Context, f informers.SharedInformerFactory, rec record.EventRecorder, log *slog.Logger) error {
			return ttlafterfinished.Run(ctx, ttlafterfinished.Config{Client: client, Informers: f, Recorder: rec, Logger: log})
		}},
		{"serviceaccount-controller", func(ctx context.Context, _ informers.SharedInformerFactory, _ record.EventRecorder, log *slog.Logger) error {
			return serviceaccount.Run(ctx, serviceaccount.Config{Client: client, CACert: l.caPEM, Logger: log})
		}},
		{"storage-version-migrator-controller", func(ctx context.Context, f informers.SharedInformerFactory, _ record.EventRecorder, log *slog.Logger) error {
			return storageversionmigration.Run(ctx, storageversionmigration.Config{Client: client, Dynamic: l.dynamic, Discovery: client.Discovery(), Informers: f, Logger: log})
		}},
	}
}

// runScheduler runs the scheduler until ctx ends (the lease is lost or the
// server stops).
func (l *loops) runScheduler(ctx context.Context) {
	factory := informers.NewSharedInformerFactory(l.scheduler, 10*time.Minute)
	defer factory.Shutdown()
	events := record.NewBroadcaster(record.WithContext(ctx))
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: l.scheduler.CoreV1().Events("")})
	defer events.Shutdown()
	err := scheduler.Run(ctx, scheduler.Config{
		Client: l.scheduler, Informers: factory, Settings: l.schedulerSettings,
		Recorder: events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "default-scheduler"}),
		Logger:   l.log.With("component", "scheduler"),
	})
	if err != nil && ctx.Err() == nil {
		l.log.Error("scheduler stopped", "err", err)
	}
}

// monitorPeriod is how often node health is checked: upstream's 5 s, or
// more often when the grace period is short (tests use seconds).
func monitorPeriod(grace time.Duration) time.Duration {
	if grace <= 0 {
		return 0
	}
	return min(5*time.Second, max(grace/4, 200*time.Millisecond))
}
